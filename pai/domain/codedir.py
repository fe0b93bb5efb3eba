"""The one rule for a job's ``codeDir``: what a job may name, checked at submission (a 400 naming the field)
and again by the agent before it fetches (a spec stored before the rule existed fails as a user error).

A codeDir is empty (no code), an absolute path on the file system the nodes share, a ``file://`` URL of such a
path, or an ``hdfs://`` / ``webhdfs://`` URL; never with a ``..`` component. A relative path means nothing to
the master: the CLI resolves one next to the spec file before it sends the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

SCHEMES = ("file", "hdfs", "webhdfs")


@dataclass(frozen=True, slots=True)
class CodeDir:
    """A valid codeDir, split: ``scheme`` is ``""`` for a plain path; ``path`` is percent-decoded."""

    scheme: str
    netloc: str
    path: str


class CodeDirError(ValueError):
    """The rule a codeDir breaks, worded to follow ``codeDir <value>: ``."""

    def __init__(self, value: str, rule: str) -> None:
        super().__init__(f"codeDir {value}: {rule}")
        self.value = value
        self.rule = rule


def parse_code_dir(value: str) -> CodeDir:
    parts = urlsplit(value)
    scheme = parts.scheme.lower()
    if scheme and scheme not in SCHEMES:
        raise CodeDirError(value, f"scheme {scheme}:// is not supported (use a path, file://, hdfs:// or webhdfs://)")
    if scheme == "file" and parts.netloc not in ("", "localhost"):
        raise CodeDirError(value, "file:// must name a local path (file:///path)")
    if scheme in ("hdfs", "webhdfs") and not parts.netloc:
        raise CodeDirError(value, f"{scheme}:// must name its namenode ({scheme}://host:port/path)")
    path = unquote(parts.path) if scheme else value
    if ".." in PurePosixPath(path).parts:
        raise CodeDirError(value, "'..' is not allowed")
    if not path.startswith("/"):
        raise CodeDirError(value, "must be an absolute path (a relative one is resolved by `pai submit` only)")
    return CodeDir(scheme, parts.netloc if scheme else "", path)
