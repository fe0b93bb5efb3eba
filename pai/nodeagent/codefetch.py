"""Copy a job's ``codeDir`` into an attempt: from a shared file system (plain path or ``file://``).

The source is scanned first (stat only): every entry must stay inside the tree (no ``..``, no link
pointing out), only files, directories and links, and the total size within the limit. The copy is
then made from that scan, through a per-node cache keyed by the source path and a fingerprint of
names, sizes and mtimes, so that the instances of a job on one node read the shared file system once.
Blocking: the agent runs :meth:`CodeFetcher.fetch` in a thread. ``hdfs://`` comes with a later issue.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import uuid
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from pai.domain.codedir import CodeDirError, parse_code_dir
from pai.protocol import PlatformExit

DEFAULT_MAX_BYTES = 1 << 30
_CHUNK = 1 << 20


class CodeFetchError(Exception):
    """The attempt cannot get its code: a user error, reported with ``exit_code`` and not retried."""

    def __init__(self, exit_code: PlatformExit, message: str, *, source: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message
        self.source = source


class EntryKind(Enum):
    DIR = "d"
    FILE = "f"
    LINK = "l"


@dataclass(frozen=True, slots=True)
class Entry:
    rel: str  # relative to the root, "/"-separated
    kind: EntryKind
    size: int = 0
    mtime_ns: int = 0
    mode: int = 0o644
    link: str | None = None  # a link's target, relative to the link's own directory

    def fingerprint_line(self) -> str:
        return f"{self.kind.value}\0{self.rel}\0{self.size}\0{self.mtime_ns}\0{self.mode:o}\0{self.link or ''}\n"


@dataclass(frozen=True, slots=True)
class Manifest:
    root: Path  # the real (resolved) source directory
    entries: tuple[Entry, ...]

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries if e.kind is EntryKind.FILE)

    @property
    def file_count(self) -> int:
        return sum(1 for e in self.entries if e.kind is EntryKind.FILE)

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for e in self.entries:
            h.update(e.fingerprint_line().encode("utf-8", "surrogateescape"))
        return h.hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class FetchResult:
    source: Path
    bytes: int
    files: int
    cached: bool  # the copy came from the node's cache, not from the shared file system


def resolve_source(code_dir: str) -> Path:
    """The local path a ``codeDir`` names; refuses what the codeDir rule refuses, and ``hdfs://`` for now."""
    try:
        parsed = parse_code_dir(code_dir)
    except CodeDirError as e:
        raise CodeFetchError(PlatformExit.CODE_DIR_INVALID, str(e), source=code_dir) from None
    if parsed.scheme in ("hdfs", "webhdfs"):
        raise CodeFetchError(
            PlatformExit.CODE_DIR_INVALID, f"codeDir {code_dir}: hdfs:// is not supported yet", source=code_dir
        )
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


class CodeFetcher:
    def __init__(self, cache_dir: Path | None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.cache_dir = cache_dir
        self.max_bytes = max_bytes

    def fetch(self, code_dir: str, dest: Path) -> FetchResult:
        """Copy ``code_dir`` to ``dest`` (which must not exist yet); raises :class:`CodeFetchError`."""
        source = resolve_source(code_dir)
        try:
            manifest = scan(source, self.max_bytes, name=code_dir)
            result = FetchResult(manifest.root, manifest.total_bytes, manifest.file_count, cached=False)
            if self.cache_dir is None:
                copy_tree(manifest, dest, self.max_bytes)
                return result
            cached, hit = self._cached_copy(manifest)
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

    def _cached_copy(self, manifest: Manifest) -> tuple[Path, bool]:
        """The cache's copy of this version of the source, made now if missing; and whether it was there."""
        assert self.cache_dir is not None
        slot = self.cache_dir / hashlib.sha256(str(manifest.root).encode()).hexdigest()[:32]
        version = slot / manifest.fingerprint()
        if version.is_dir():
            return version, True
        slot.mkdir(parents=True, exist_ok=True)
        tmp = slot / f".tmp-{uuid.uuid4().hex}"
        try:
            copy_tree(manifest, tmp, self.max_bytes)
            with contextlib.suppress(OSError):  # another fetch of the same version won the race
                os.rename(tmp, version)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        for old in slot.iterdir():  # keep one version per source
            if old != version and not old.name.startswith(".tmp-"):
                shutil.rmtree(old, ignore_errors=True)
        return version, False
