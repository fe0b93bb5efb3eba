"""What a codeDir fetch works with: the listing of a source tree (its manifest), the result, the error."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from pai.protocol import PlatformExit


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
