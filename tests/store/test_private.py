"""Private files and directories: 0600 and 0700 whatever the umask; a shared (sticky) directory is left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.store.db import Database
from pai.store.private import private_dir, write_private
from tests.filemodes import mode

pytestmark = pytest.mark.usefixtures("umask_022")

DIRS = {
    "missing": (None, 0o700),
    "left readable": (0o755, 0o700),
    "shared, sticky (as /tmp)": (0o1777, 0o1777),
}


@pytest.mark.parametrize(("before", "after"), list(DIRS.values()), ids=list(DIRS))
def test_a_data_dir_is_made_private(tmp_path: Path, before: int | None, after: int) -> None:
    path = tmp_path / "data"
    if before is not None:
        path.mkdir()
        path.chmod(before)
    private_dir(path)
    assert oct(mode(path)) == oct(after)


def test_a_private_file_replaces_a_readable_one(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("old")
    path.chmod(0o644)
    write_private(path, "new")
    assert (path.read_text(), mode(path)) == ("new", 0o600)


def test_a_sqlite_database_and_its_wal_are_private(tmp_path: Path) -> None:
    (tmp_path / "pai.db-wal").write_text("")  # left readable by an older version
    (tmp_path / "pai.db-wal").chmod(0o644)
    db = Database(f"sqlite:///{tmp_path / 'pai.db'}")
    try:
        db.migrate()
        names = {p.name: oct(mode(p)) for p in tmp_path.iterdir()}
    finally:
        db.dispose()
    assert names == dict.fromkeys(("pai.db", "pai.db-wal", "pai.db-shm"), oct(0o600))
