"""Files only their owner reads: the data directory (0700) and what it keeps (0600), whatever the umask.

The database, its ``-wal`` and ``-shm``, the agent token, the secret key and ``pai up``'s credentials go through
here. A file is created with its mode (``os.open``/``mkstemp``, then ``fchmod``: the umask only takes bits away), and a
file left with a wider mode by an older version is narrowed when it is next opened.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
from pathlib import Path

log = logging.getLogger("pai.store.private")

DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """``path`` (and its missing parents) as a directory of mode 0700. A shared directory (sticky, as ``/tmp``) or one
    this user may not change keeps its mode (logged): the files in it are 0600 all the same."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if path.stat().st_mode & stat.S_ISVTX:
        log.warning("the data directory path=%s is shared (sticky): its mode is left as it is", path)
        return path
    _narrow(path, DIR_MODE)
    return path


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically with mode 0600 (a missing directory is made 0700)."""
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def restrict(path: Path) -> None:
    """Narrow an existing file to 0600 (nothing happens to a missing one)."""
    with contextlib.suppress(FileNotFoundError):
        _narrow(path, FILE_MODE)


def private_sqlite(database: Path) -> None:
    """Before SQLite opens ``database``: the file created 0600 if it is missing (SQLite gives its ``-wal`` and
    ``-shm`` the database file's mode), files left wider by an older version narrowed, a missing directory made 0700
    (the master makes its data directory 0700 itself: ``private_dir``)."""
    database.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.close(os.open(database, os.O_RDONLY | os.O_CREAT, FILE_MODE))  # the umask takes bits away: 0600 stays
    for path in (database, *(database.with_name(database.name + suffix) for suffix in SQLITE_SIDE_FILES)):
        restrict(path)


def _narrow(path: Path, mode: int) -> None:
    try:
        if path.stat().st_mode & 0o777 != mode:
            path.chmod(mode)
    except PermissionError as e:
        log.warning("cannot narrow the mode of path=%s to %o: %s", path, mode, e.strerror)
