"""The on-disk size cap of an attempt's log files, and reading a capped log.

Tasks write ``stdout.log``/``stderr.log`` in append mode (the process runtime opens them so, the docker
runtime's wrapper uses ``>>``). When a file passes the cap, the agent copies it to ``<file>.1`` (replacing the
previous one) and truncates it: the writer goes on at the new end. So a stream keeps at most about twice the
cap on disk: its newest output, and the chunk before. What is dropped is counted in ``<file>.dropped``. Output
written between the copy and the truncation is lost (logrotate's ``copytruncate`` has the same window).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

DEFAULT_MAX_LOG_MB = 100


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


def cap(files: Iterable[Path], max_bytes: int) -> list[Path]:
    """Rotate every file of ``files`` over ``max_bytes``; returns those rotated."""
    rotated = []
    for path in files:
        try:
            if path.stat().st_size <= max_bytes:
                continue
        except OSError:
            continue
        older = previous(path)
        lost = older.stat().st_size if older.exists() else 0
        shutil.copyfile(path, older)
        os.truncate(path, 0)
        if lost:
            _counter(path).write_text(str(dropped(path) + lost))
        rotated.append(path)
    return rotated


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
