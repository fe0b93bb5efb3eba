"""Where a v1 job's local paths may point.

``codeDir``, ``dataDir`` and ``outputDir`` given as a plain path or a ``file://`` URL name a directory of the
nodes' file system. One is allowed only under a root of the cluster configuration's ``localPaths`` that is open
to the job's user, once every link in it is resolved, and never over the platform's own files (the master's data
directory, an agent's work directory, a token file): neither inside one nor holding one. ``hdfs://`` and the
other URLs are not local paths; storages are mounted by name (``pai.domain.storage``).

The master checks at submission and the agent again before it copies a codeDir, each resolving the paths on its
own machine: the caller passes its ``realpath`` in, so the rule itself touches no file system.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

Realpath = Callable[[str], str]

# What the platform's own paths are called in a refusal.
MASTER_DATA_DIR = "the master's data directory"
AGENT_WORK_DIR = "the node agent's work directory"
AGENT_TOKEN_FILE = "the node agent's token file"


@dataclass(frozen=True, slots=True)
class LocalRoot:
    """One entry of the configuration's ``localPaths``: a directory (on every node) jobs may name paths under."""

    path: str
    groups: tuple[str, ...] = ()  # the groups it is open to; () for everyone

    def open_to(self, groups: Collection[str], *, admin: bool = False) -> bool:
        return admin or not self.groups or any(g in groups for g in self.groups)


@dataclass(frozen=True, slots=True)
class Protected:
    """A path of the platform's own that no job may name, nor a directory holding it; ``what`` names it."""

    path: str
    what: str


def master_paths(paths: Sequence[str]) -> tuple[Protected, ...]:
    """The paths a start command names as the master's own (its data directory)."""
    return tuple(Protected(p, MASTER_DATA_DIR) for p in paths)


def roots_open_to(roots: Sequence[LocalRoot], groups: Collection[str], *, admin: bool = False) -> tuple[str, ...]:
    """The roots a user may name paths under, as written (admins: every root listed, and nothing more)."""
    return tuple(r.path for r in roots if r.open_to(groups, admin=admin))


def local_part(value: str) -> str | None:
    """The path ``value`` names on a node's file system: a plain path as it is, a ``file://`` URL's path; None for
    no path (empty) or another scheme (``hdfs://``, ...)."""
    if not value:
        return None
    parts = urlsplit(value)
    if parts.scheme.lower() == "file":
        return unquote(parts.path) if parts.netloc in ("", "localhost") else value
    return None if parts.scheme and "://" in value else value


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class _Seen:
    """A local path as the rules see it: as written, and resolved on this machine."""

    value: str
    path: str
    real: str
    roots: tuple[str, ...]  # as written
    real_roots: tuple[str, ...]
    protected: tuple[Protected, ...]  # with their paths resolved


def _remote_file_url(p: _Seen) -> str | None:
    return "file:// must name a local path (file:///path)" if p.path == p.value and "://" in p.value else None


def _relative(p: _Seen) -> str | None:
    return None if p.path.startswith("/") else "must be an absolute path"


def _dotdot(p: _Seen) -> str | None:
    return "'..' is not allowed" if ".." in PurePosixPath(p.path).parts else None


def _outside_roots(p: _Seen) -> str | None:
    if any(inside(p.real, r) for r in p.real_roots):
        return None
    if not p.roots:
        return ("no local path is allowed to this user: the cluster configuration's localPaths grants none "
                "(use hdfs:// or a storage)")
    where = f" (resolved: {p.real})" if p.real != p.path else ""
    return f"is not under a local path this user may use{where} (localPaths: {', '.join(p.roots)})"


def _over_protected(p: _Seen) -> str | None:
    for guard in p.protected:
        if inside(p.real, guard.path) or inside(guard.path, p.real):
            return f"overlaps {guard.what}: no job may read the platform's own files"
    return None


Rule = Callable[[_Seen], str | None]
# The rules in order, the first that speaks is the answer: the shape of the path as written (nothing is resolved
# for one that cannot be a path), then where it leads once resolved.
SHAPE_RULES: tuple[tuple[str, Rule], ...] = (
    ("remote file URL", _remote_file_url),
    ("relative", _relative),
    ("dot-dot", _dotdot),
)
PLACE_RULES: tuple[tuple[str, Rule], ...] = (
    ("outside the roots", _outside_roots),
    ("over the platform's files", _over_protected),
)


def path_problem(value: str, roots: Sequence[str], protected: Sequence[Protected], realpath: Realpath) -> str | None:
    """Why ``value`` (a codeDir, dataDir or outputDir) may not be used by a user granted ``roots``; None when it
    may, or when it names no local path."""
    path = local_part(value)
    if path is None:
        return None
    shape = _Seen(value, path, path, tuple(roots), (), ())
    for _, rule in SHAPE_RULES:
        if (problem := rule(shape)) is not None:
            return problem
    seen = _Seen(value, path, realpath(path), tuple(roots), tuple(realpath(r) for r in roots),
                 tuple(Protected(realpath(g.path), g.what) for g in protected))
    for _, rule in PLACE_RULES:
        if (problem := rule(seen)) is not None:
            return problem
    return None
