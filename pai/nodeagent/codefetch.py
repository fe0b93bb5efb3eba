"""Copy a job's ``codeDir`` into an attempt: from a shared file system (plain path or ``file://``) or from
HDFS (``hdfs://``, ``webhdfs://``: see ``hdfs_source.py``).

A local codeDir is read only when, its links resolved on this node, it lies under one of the roots the start
command carries (the cluster's ``localPaths`` open to the job's user) and off the platform's own paths (the
agent's work directory and token file, the master's data directory): ``pai.domain.localpaths``, checked before
anything is read and again on the tree as scanned.

The source is scanned first (stat only): every entry must stay inside the tree (no ``..``, no link
pointing out), only files, directories and links, and the total size within the limit. The copy is
then made from that scan, through a per-node cache keyed by the source and a fingerprint of names, sizes
and mtimes, so that the instances of a job on one node read the source once.
Blocking: the agent runs :meth:`CodeFetcher.fetch` in a thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from pai.domain.codedir import CodeDirError, parse_code_dir
from pai.domain.localpaths import Protected, path_problem
from pai.nodeagent.codefetch_model import CodeFetchError, Entry, EntryKind, FetchResult, Manifest
from pai.nodeagent.hdfs_source import HdfsSource
from pai.protocol import PlatformExit

DEFAULT_MAX_BYTES = 200 << 20
_CHUNK = 1 << 20


def is_hdfs(code_dir: str) -> bool:
    return code_dir.split("://", 1)[0].lower() in ("hdfs", "webhdfs") and "://" in code_dir


def resolve_source(code_dir: str) -> Path:
    """The local path a ``codeDir`` names; refuses what the codeDir rule refuses."""
    try:
        parsed = parse_code_dir(code_dir)
    except CodeDirError as e:
        raise CodeFetchError(PlatformExit.CODE_DIR_INVALID, str(e), source=code_dir) from None
    if parsed.scheme in ("hdfs", "webhdfs"):
        raise CodeFetchError(PlatformExit.CODE_DIR_INVALID, f"codeDir {code_dir}: not a local path", source=code_dir)
    return Path(parsed.path)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def scan(source: Path, max_bytes: int, *, name: str | None = None) -> Manifest:
    """List the tree under ``source`` (stat only), refusing escapes and anything past ``max_bytes``."""
    name = name or str(source)

    def fail(code: PlatformExit, message: str) -> CodeFetchError:
        return CodeFetchError(code, f"codeDir {name}: {message}", source=name)

    if not source.is_dir():
        raise fail(PlatformExit.CODE_DIR_MISSING, "does not exist or is not a directory")
    root = os.path.realpath(source)
    entries: list[Entry] = []
    total = 0

    def walk_error(e: OSError) -> None:
        raise fail(PlatformExit.CODE_DIR_MISSING, f"cannot be read: {e.strerror}: {e.filename}")

    for dirpath, dirnames, filenames in os.walk(root, onerror=walk_error):
        for entry_name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, entry_name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                target = os.path.realpath(path)
                if not _inside(target, root):
                    raise fail(PlatformExit.CODE_DIR_INVALID, f"link {rel} points outside the directory")
                link = os.path.relpath(target, dirpath)
                entries.append(Entry(rel, EntryKind.LINK, mtime_ns=st.st_mtime_ns, link=link))
            elif stat.S_ISDIR(st.st_mode):
                entries.append(Entry(rel, EntryKind.DIR, mode=stat.S_IMODE(st.st_mode)))
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > max_bytes:
                    raise fail(PlatformExit.CODE_DIR_TOO_LARGE, f"is larger than the limit of {max_bytes} bytes")
                entries.append(Entry(rel, EntryKind.FILE, st.st_size, st.st_mtime_ns, stat.S_IMODE(st.st_mode)))
            else:
                raise fail(PlatformExit.CODE_DIR_INVALID, f"{rel} is not a file, directory or link")
    return Manifest(Path(root), tuple(sorted(entries, key=lambda e: e.rel)))


def copy_tree(manifest: Manifest, dest: Path, max_bytes: int) -> None:
    """Make ``dest`` a copy of what ``manifest`` lists, never following a link in the source."""
    dest.mkdir(parents=True)
    copied = 0
    for e in manifest.entries:
        src, dst = manifest.root / e.rel, dest / e.rel
        if e.kind is EntryKind.DIR:
            dst.mkdir()
        elif e.kind is EntryKind.LINK:
            assert e.link is not None
            os.symlink(e.link, dst)
        else:
            fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as fin, open(dst, "wb") as fout:
                while chunk := fin.read(_CHUNK):
                    copied += len(chunk)
                    if copied > max_bytes:
                        raise CodeFetchError(
                            PlatformExit.CODE_DIR_TOO_LARGE,
                            f"codeDir {manifest.root}: grew past the limit of {max_bytes} bytes while copied",
                            source=str(manifest.root),
                        )
                    fout.write(chunk)
            os.chmod(dst, e.mode)
            os.utime(dst, ns=(e.mtime_ns, e.mtime_ns))


def require_allowed(code_dir: str, path: str, roots: Sequence[str], protected: Sequence[Protected]) -> None:
    """``path`` (what ``code_dir`` names) under ``roots`` and off ``protected`` on this node, else -124."""
    problem = path_problem(path, roots, protected, os.path.realpath)
    if problem is not None:
        raise CodeFetchError(PlatformExit.LOCAL_PATH_NOT_ALLOWED, f"codeDir {code_dir}: {problem}", source=code_dir)


class CodeFetcher:
    def __init__(self, cache_dir: Path | None, max_bytes: int = DEFAULT_MAX_BYTES,
                 protected: Sequence[Protected] = ()) -> None:
        self.cache_dir = cache_dir
        self.max_bytes = max_bytes
        self.protected = tuple(protected)  # this agent's own paths (work directory, token file)

    def fetch(self, code_dir: str, dest: Path, webhdfs: str = "", *, roots: Sequence[str] = (),
              protected: Sequence[Protected] = ()) -> FetchResult:
        """Copy ``code_dir`` to ``dest`` (which must not exist yet); raises :class:`CodeFetchError`.
        ``webhdfs``: the WebHDFS address of an ``hdfs://`` codeDir's namenode (cluster configuration).
        ``roots``: where a local codeDir may be (none: nowhere); ``protected``: more paths it may not overlap."""
        if is_hdfs(code_dir):
            return self._fetch_hdfs(code_dir, dest, webhdfs)
        source = resolve_source(code_dir)
        guards = (*self.protected, *protected)
        require_allowed(code_dir, str(source), roots, guards)
        try:
            manifest = scan(source, self.max_bytes, name=code_dir)
            require_allowed(code_dir, str(manifest.root), roots, guards)  # a link swapped in since the check
            result = FetchResult(manifest.root, manifest.total_bytes, manifest.file_count, cached=False)
            if self.cache_dir is None:
                copy_tree(manifest, dest, self.max_bytes)
                return result
            cached, hit = self._cached_copy(manifest, lambda tmp: copy_tree(manifest, tmp, self.max_bytes))
            try:
                shutil.copytree(cached, dest, symlinks=True)
            except OSError:  # evicted under us by a newer version: read the source itself
                shutil.rmtree(dest, ignore_errors=True)
                copy_tree(manifest, dest, self.max_bytes)
                hit = False
            return FetchResult(manifest.root, result.bytes, result.files, cached=hit)
        except (FileNotFoundError, NotADirectoryError) as e:
            raise CodeFetchError(
                PlatformExit.CODE_DIR_MISSING, f"codeDir {code_dir}: changed while copied: {e}", source=code_dir
            ) from e
        except PermissionError as e:
            raise CodeFetchError(
                PlatformExit.CODE_DIR_MISSING, f"codeDir {code_dir}: cannot be read: {e}", source=code_dir
            ) from e

    def _fetch_hdfs(self, code_dir: str, dest: Path, webhdfs: str) -> FetchResult:
        try:
            hdfs = HdfsSource(code_dir, webhdfs)
        except CodeDirError as e:
            raise CodeFetchError(PlatformExit.CODE_DIR_INVALID, str(e), source=code_dir) from None
        manifest = hdfs.manifest(self.max_bytes)
        if self.cache_dir is None:
            hdfs.download(manifest, dest, self.max_bytes)
            return FetchResult(manifest.root, manifest.total_bytes, manifest.file_count, cached=False)
        cached, hit = self._cached_copy(manifest, lambda tmp: hdfs.download(manifest, tmp, self.max_bytes))
        shutil.copytree(cached, dest, symlinks=True)
        return FetchResult(manifest.root, manifest.total_bytes, manifest.file_count, cached=hit)

    def _cached_copy(self, manifest: Manifest, materialize: Callable[[Path], None]) -> tuple[Path, bool]:
        """The cache's copy of this version of the source, made now (by ``materialize``) if missing; and
        whether it was there."""
        assert self.cache_dir is not None
        slot = self.cache_dir / hashlib.sha256(str(manifest.root).encode()).hexdigest()[:32]
        version = slot / manifest.fingerprint()
        if version.is_dir():
            return version, True
        slot.mkdir(parents=True, exist_ok=True)
        tmp = slot / f".tmp-{uuid.uuid4().hex}"
        try:
            materialize(tmp)
            with contextlib.suppress(OSError):  # another fetch of the same version won the race
                os.rename(tmp, version)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        for old in slot.iterdir():  # keep one version per source
            if old != version and not old.name.startswith(".tmp-"):
                shutil.rmtree(old, ignore_errors=True)
        return version, False
