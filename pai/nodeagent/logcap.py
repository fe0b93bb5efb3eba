"""The on-disk share of an attempt's logs, and reading a capped log.

Tasks write ``stdout.log``/``stderr.log`` in append mode (the process runtime opens them so, the docker
runtime's wrapper uses ``>>``). Every attempt's logs together get a share of the disk (``--max-task-log-mb``),
and each file a cap (``--max-log-mb``): a file rotates past :func:`file_cap`, the smaller of its own cap and
its part of the share, so that every file of the attempt with the chunk before it stays within the share.

Rotating a file copies its newest ``cap`` bytes to ``<file>.1`` (replacing the previous chunk) and truncates it:
the writer goes on at the new end. Whatever is not kept is dropped and counted in ``<file>.dropped``: the
chunk replaced, what the file held past the cap, and, when the copy cannot be written (a full or read-only
disk), the whole file. Output written between the copy and the truncation is lost (logrotate's
``copytruncate`` has the same window). The agent checks the logs of its running attempts every
``log_cap_seconds`` (and once more as they end): between two checks a task can write past its share.

A follower (``read_from``) reads the log by its offset in everything the task wrote: the bytes dropped, then the
previous chunk, then the current file. A rotation keeps that sum (what it drops it counts), so an offset stays good
across rotations; rotations and reads take one lock, so that a read never sees a rotation half done.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_MAX_LOG_MB = 100
DEFAULT_MAX_TASK_LOG_MB = 400  # stdout and stderr, each with its previous chunk, at the default file cap
_CHUNK = 1 << 20
_ROTATION = threading.Lock()  # a rotation (with its count) against a follower's read


def file_cap(max_file_bytes: int, max_task_bytes: int, streams: int) -> int:
    """Where each of an attempt's ``streams`` log files rotates: all of them, each with its previous chunk, stay
    within ``max_task_bytes``."""
    return max(1, min(max_file_bytes, max_task_bytes // (2 * max(1, streams))))


def previous(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def _counter(path: Path) -> Path:
    return path.with_name(path.name + ".dropped")


def dropped(path: Path) -> int:
    """Bytes of this log that the cap dropped so far."""
    try:
        return int(_counter(path).read_text() or 0)
    except (OSError, ValueError):
        return 0


@dataclass
class Capped:
    """What one pass of :func:`cap` did."""

    rotated: list[Path] = field(default_factory=list)
    dropped: int = 0  # bytes, over every file
    errors: list[tuple[Path, OSError]] = field(default_factory=list)  # what could not be done (and why)


def cap(files: Iterable[Path], max_bytes: int) -> Capped:
    """Rotate every file of ``files`` over ``max_bytes``."""
    done = Capped()
    for path in files:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size <= max_bytes:
            continue
        with _ROTATION:
            _rotate_counted(path, size, max_bytes, done)
    return done


def _rotate_counted(path: Path, size: int, max_bytes: int, done: Capped) -> None:
    try:
        lost = _rotate(path, size, max_bytes, done)
    except OSError as e:
        done.errors.append((path, e))
        return
    done.rotated.append(path)
    done.dropped += lost
    try:
        _counter(path).write_text(str(dropped(path) + lost))
    except OSError as e:
        done.errors.append((_counter(path), e))


def _rotate(path: Path, size: int, keep: int, done: Capped) -> int:
    """Move the newest ``keep`` bytes of ``path`` to its previous chunk, truncate it; the bytes dropped."""
    older = previous(path)
    lost = older.stat().st_size if older.exists() else 0
    older.unlink(missing_ok=True)  # frees its space before the copy takes some
    try:
        _copy_tail(path, older, size, keep)
    except OSError as e:  # no room for the chunk: the whole file is dropped
        done.errors.append((older, e))
        with contextlib.suppress(OSError):
            older.unlink(missing_ok=True)
        keep = 0
    os.truncate(path, 0)
    return lost + size - keep


def _copy_tail(src: Path, dst: Path, size: int, keep: int) -> None:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        fin.seek(size - keep)
        left = keep
        while left > 0 and (chunk := fin.read(min(_CHUNK, left))):
            fout.write(chunk)
            left -= len(chunk)


def size(path: Path) -> int:
    """The bytes of the log kept on disk (the previous chunk and the current file)."""
    return sum(p.stat().st_size for p in (previous(path), path) if p.is_file())


def tail(path: Path, n: int) -> bytes:
    """The last ``n`` bytes of the log kept on disk, across the previous chunk and the current file."""
    chunks: list[bytes] = []
    for part in (path, previous(path)):
        if n <= 0 or not part.is_file():
            continue
        with open(part, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - n))
            data = f.read()
        chunks.append(data)
        n -= len(data)
    return b"".join(reversed(chunks))


@dataclass(frozen=True, slots=True)
class Read:
    """What ``read_from`` read: ``data`` from offset ``start`` (later than asked when the cap dropped what was asked
    for); ``end``: the offset past everything written so far."""

    data: bytes
    start: int
    end: int

    @property
    def next(self) -> int:
        return self.start + len(self.data)


def _parts(path: Path) -> tuple[int, int, int]:
    """Bytes dropped, in the previous chunk, in the current file."""
    return dropped(path), _size(previous(path)), _size(path)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def written(path: Path) -> int:
    """The offset past everything the task wrote to this log: dropped, previous chunk and current file."""
    with _ROTATION:
        return sum(_parts(path))


def read_from(path: Path, offset: int, limit: int = _CHUNK) -> Read:
    """At most ``limit`` bytes of the log from ``offset`` in everything the task wrote (``written``)."""
    with _ROTATION:
        lost, chunk, current = _parts(path)
        start = max(offset, lost)
        out = b""
        for part, begin, size in ((previous(path), lost, chunk), (path, lost + chunk, current)):
            at = start + len(out)
            if len(out) >= limit or at >= begin + size:
                continue
            with contextlib.suppress(FileNotFoundError), open(part, "rb") as f:
                f.seek(at - begin)
                out += f.read(min(limit - len(out), begin + size - at))
        return Read(out, start, lost + chunk + current)
