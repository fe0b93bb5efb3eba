"""The secret key: where it comes from, the key file it makes (0600), a database that refuses another key, rotation."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from pai.store import jobs, keyring, sealing
from pai.store.db import Database
from pai.store.keyring import KEY_ENV, Keyring, SecretKeyError
from pai.store.rotation import rotate
from pai.store.schema import JobRow
from tests.filemodes import mode

from .conftest import TEST_KEYRING
from .secretjobs import secret_job

A, B = Keyring.generate().keys[0], Keyring.generate().keys[0]


SOURCES = {
    "one key in the environment": ({KEY_ENV: A}, None, (A,), KEY_ENV),
    "keys in the environment, newest first": ({KEY_ENV: f" {B} , {A} "}, None, (B, A), KEY_ENV),
    "the environment before the file": ({KEY_ENV: A}, f"{B}\n", (A,), KEY_ENV),
    "the key file, a key a line": ({}, f"{B}\n\n{A}\n", (B, A), "secret-key"),
    "nothing": ({}, None, None, None),
}


@pytest.mark.parametrize(("env", "file", "keys", "source"), list(SOURCES.values()), ids=list(SOURCES))
def test_where_the_keys_come_from(tmp_path: Path, env: dict[str, str], file: str | None,
                                  keys: tuple[str, ...] | None, source: str | None) -> None:
    if file is not None:
        keyring.key_file(tmp_path).write_text(file)
    found = keyring.configured(tmp_path, env)
    wanted_source = str(keyring.key_file(tmp_path)) if source == "secret-key" else source
    assert (None if found is None else (found.keys, found.source)) == (None if keys is None else (keys, wanted_source))


def test_a_key_file_is_made_once_with_mode_0600(tmp_path: Path, umask_022: None) -> None:
    made = keyring.load(tmp_path / "data", create=True, env={})
    path = keyring.key_file(tmp_path / "data")
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert keyring.load(tmp_path / "data", create=True, env={}).keys == made.keys


def test_a_key_file_left_readable_is_narrowed(tmp_path: Path) -> None:
    path = keyring.key_file(tmp_path)
    path.write_text(A)
    path.chmod(0o644)
    assert keyring.configured(tmp_path, {}) is not None and mode(path) == 0o600


BAD_KEYS = {
    "malformed": ("not-a-key-value", "is not a Fernet key"),
    "one good, one malformed": (f"{A},not-a-key-value", "is not a Fernet key"),
    "only commas": (" , ", "holds no key"),
}


@pytest.mark.parametrize(("value", "problem"), list(BAD_KEYS.values()), ids=list(BAD_KEYS))
def test_a_bad_key_names_its_source_not_its_value(tmp_path: Path, value: str, problem: str) -> None:
    with pytest.raises(SecretKeyError, match=f"{KEY_ENV}.*{problem}") as caught:
        keyring.configured(tmp_path, {KEY_ENV: value})
    assert caught.value.source == KEY_ENV and "not-a-key-value" not in caught.value.message


def test_a_database_refuses_another_key_at_start(db: Database) -> None:
    db.migrate()  # records the check value of the tests' key
    other = Database(db.url.render_as_string(hide_password=False), Keyring.generate("PAI_SECRET_KEY"))
    try:
        with pytest.raises(SecretKeyError, match=r"PAI_SECRET_KEY does not open the secrets sealed in this database"):
            other.migrate()
    finally:
        other.dispose()


def test_no_key_file_is_made_for_a_database_another_key_sealed(db: Database, tmp_path: Path) -> None:
    db.migrate()
    with pytest.raises(SecretKeyError, match="this database's secrets were sealed with a key"):
        keyring.load(tmp_path, create=True, env={}, database=db.engine)
    assert not keyring.key_file(tmp_path).exists()


def _tokens(db: Database) -> list[str | None]:
    with db.session() as s:
        return list(s.scalars(select(JobRow.sealed).order_by(JobRow.name)))


def test_rotation_seals_every_secret_with_the_new_key(db: Database) -> None:
    db.migrate()
    values = [secret_job(f"secret-{i}")[0] for i in range(3)]
    with db.session() as s:
        for value in values:
            jobs.insert_job(s, value, "")
    before = _tokens(db)
    new = Keyring.generate("the new key")
    assert rotate(db, new.with_older(TEST_KEYRING)).jobs == 3
    assert all(a != b for a, b in zip(before, _tokens(db), strict=True))
    url = db.url.render_as_string(hide_password=False)
    for ring, opens in ((new, True), (TEST_KEYRING, False)):
        again = Database(url, ring)
        try:
            if not opens:
                with pytest.raises(SecretKeyError):
                    again.migrate()
                continue
            again.migrate()
            with again.session() as s:
                assert [sealing.unsealed(s, jobs.get_job(s, v.key).spec) for v in values] == [v.spec for v in values]
        finally:
            again.dispose()


def test_a_rotation_with_keys_that_do_not_open_the_database_changes_nothing(db: Database) -> None:
    db.migrate()
    with db.session() as s:
        jobs.insert_job(s, secret_job()[0], "")
    before = _tokens(db)
    with pytest.raises(SecretKeyError):
        rotate(db, Keyring.generate().with_older(Keyring.generate()))
    assert _tokens(db) == before
