"""``pai secret-key rotate``: every stored secret sealed again with a new key, from the key file or PAI_SECRET_KEY;
``pai master`` with a key that is not its database's stops with one line."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session

from pai.main import cli
from pai.store import jobs, keyring, leases, sealing
from pai.store.db import Database, database_url
from pai.store.keyring import KEY_ENV, Keyring, SecretKeyError
from tests.store.secretjobs import secret_job

NAMES = ("one", "two")


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (KEY_ENV, "PAI_NEW_SECRET_KEY", "PAI_DATABASE_URL", "PAI_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "data"


def stored_by_a_master(directory: Path, ring: Keyring) -> None:
    """What a master with ``ring`` leaves: its database, migrated and checked, with two jobs' secrets sealed."""
    db = Database(database_url(directory), ring)
    try:
        db.migrate()
        with db.session() as s:
            for name in NAMES:
                value, body = secret_job(name)
                jobs.insert_job(s, value, body)
    finally:
        db.dispose()


def opens(directory: Path, ring: Keyring) -> bool:
    """Whether a master with ``ring`` starts on this database and opens every job's secrets."""
    db = Database(database_url(directory), ring)
    try:
        db.migrate()
        with db.session() as s:
            return all(sealing.unsealed(s, jobs.get_job(s, f"alice~{n}").spec) == secret_job(n)[0].spec for n in NAMES)
    except SecretKeyError:
        return False
    finally:
        db.dispose()


def rotate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["secret-key", "rotate", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_rotating_the_key_file(data_dir: Path) -> None:
    old = keyring.load(data_dir, create=True)
    stored_by_a_master(data_dir, old)
    code, output = rotate("--data-dir", str(data_dir))
    assert code == 0, output
    assert "sealed the secrets of 2 job(s) again" in output
    new = keyring.configured(data_dir)
    assert new is not None and len(new.keys) == 1 and new.keys != old.keys  # the old key is gone once done
    assert stat.S_IMODE(keyring.key_file(data_dir).stat().st_mode) == 0o600
    assert opens(data_dir, new) and not opens(data_dir, old)


def test_rotating_a_key_from_the_environment(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old, given = Keyring.generate(), Keyring.generate()
    stored_by_a_master(data_dir, old)
    monkeypatch.setenv(KEY_ENV, old.keys[0])
    code, output = rotate("--data-dir", str(data_dir), "--new-key", given.keys[0])
    assert code == 0 and f"set {KEY_ENV} to it on every master" in output and given.keys[0] not in output
    assert opens(data_dir, given) and not opens(data_dir, old)
    code, output = rotate("--data-dir", str(data_dir))  # a new key made and printed
    assert code == 1 and "does not open" in output  # PAI_SECRET_KEY still holds the old key
    monkeypatch.setenv(KEY_ENV, given.keys[0])
    code, output = rotate("--data-dir", str(data_dir))
    made = Keyring((output.strip().splitlines()[-1],), "printed")
    assert code == 0 and opens(data_dir, made) and not opens(data_dir, given)
    assert not keyring.key_file(data_dir).exists()


def test_rotating_is_refused_while_a_master_runs_or_without_a_key(data_dir: Path) -> None:
    code, output = rotate("--data-dir", str(data_dir))
    assert code == 1 and "no secret key to rotate" in output
    old = keyring.load(data_dir, create=True)
    stored_by_a_master(data_dir, old)
    holder = "http://m1:9186#1.ab"  # a master of the database: it holds the launcher's lease while it runs
    lease(data_dir, lambda s: leases.acquire_or_renew(s, leases.LAUNCHER, holder, 15.0))
    code, output = rotate("--data-dir", str(data_dir))
    assert code == 1 and "a master of this database is running" in output
    assert keyring.configured(data_dir) is not None and opens(data_dir, old)
    lease(data_dir, lambda s: leases.release(s, leases.LAUNCHER, holder, 1))  # it stopped
    code, output = rotate("--data-dir", str(data_dir))
    assert code == 0 and not opens(data_dir, old)


def lease(directory: Path, change: Callable[[Session], object]) -> None:
    db = Database(database_url(directory))
    try:
        with db.session() as s:
            change(s)
    finally:
        db.dispose()


@pytest.fixture
def free_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    yield port


def test_a_master_with_another_key_stops_with_one_line(data_dir: Path, free_port: int) -> None:
    stored_by_a_master(data_dir, Keyring.generate())
    env = {**os.environ, KEY_ENV: Keyring.generate().keys[0]}
    done = subprocess.run([sys.executable, "-m", "pai", "master", "--port", str(free_port),
                           "--data-dir", str(data_dir)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"Error: the secret key from {KEY_ENV} does not open the secrets sealed in this database" in done.stderr
    assert "Traceback" not in done.stderr
