"""Database fixtures for store tests, reusable by other packages' tests.

``make_database(kind, tmp_path)`` yields a migrated ``Database`` on a fresh SQLite file or in a fresh
PostgreSQL schema (dropped afterwards), sealing job secrets with ``TEST_KEYRING``. ``reset_database(db)`` empties
every table.

Fixtures: ``kind`` ("sqlite", "postgresql"; session-scoped params), ``db`` (migrated and empty, once per backend;
one database per backend per test session, emptied before each test), ``empty_db`` (fresh, never migrated).
Password hashing runs with a cheap scrypt cost in these tests (``fast_kdf``, autouse).
PostgreSQL is the server at ``$PAI_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``);
when it is unreachable the PostgreSQL cases fail under ``CI=true`` and skip otherwise.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from pai.store import credentials, keyword
from pai.store.db import Database, normalize_url
from pai.store.keyring import Keyring
from pai.store.schema import metadata

Kind = Literal["sqlite", "postgresql"]
KINDS: tuple[Kind, ...] = ("sqlite", "postgresql")
TEST_KEYRING = Keyring.generate("the tests' key")  # seals the job secrets of every make_database
POSTGRES_URL = os.environ.get("PAI_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@cache
def _postgres_problem() -> str | None:
    """None when the test server answers, else why not."""
    engine = create_engine(normalize_url(POSTGRES_URL), connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except OperationalError as e:
        return f"PostgreSQL at {POSTGRES_URL} is not reachable: {e.orig}"
    finally:
        engine.dispose()
    return None


def require_postgres() -> None:
    """Fail (CI=true) or skip the calling test when the PostgreSQL test server is down."""
    problem = _postgres_problem()
    if problem is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(problem)
    pytest.skip(problem)


@contextmanager
def _postgres_schema() -> Iterator[str]:
    """A URL whose connections live in a new schema ``pai_test_<random>``, dropped on exit."""
    schema = f"pai_test_{secrets.token_hex(6)}"
    admin = create_engine(normalize_url(POSTGRES_URL), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
            # Installed once for the database, as an operator would: the keyword index's migration finds it in
            # ``public`` instead of creating it in this schema (and dropping it, and every schema's index, with it).
            connection.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public"))
        separator = "&" if "?" in POSTGRES_URL else "?"
        yield f"{POSTGRES_URL}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


@contextmanager
def make_database(kind: Kind, tmp_path: Path, *, migrate: bool = True) -> Iterator[Database]:
    """A private ``Database`` of ``kind`` ("sqlite" or "postgresql"), migrated to head unless ``migrate=False``."""
    if kind == "sqlite":
        db = Database(f"sqlite:///{tmp_path / 'pai-test.db'}", TEST_KEYRING)
        try:
            if migrate:
                db.migrate()
            yield db
        finally:
            db.dispose()
        return
    require_postgres()
    with _postgres_schema() as url:
        db = Database(url, TEST_KEYRING)
        try:
            if migrate:
                db.migrate()
            yield db
        finally:
            db.dispose()


def reset_database(db: Database) -> None:
    """Delete every row of every table (the schema stays)."""
    with db.session() as s:
        if db.dialect == "postgresql":
            names = ", ".join(f'"{table.name}"' for table in metadata.sorted_tables)
            s.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        else:
            for table in reversed(metadata.sorted_tables):
                s.execute(table.delete())
            keyword.rebuild(s.connection())  # of no jobs: the index of the deleted ones goes


def _kind_params() -> list[object]:
    return [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session", params=_kind_params())
def kind(request: pytest.FixtureRequest) -> Kind:
    value: Kind = request.param
    return value


@pytest.fixture(scope="session")
def shared_db(kind: Kind, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    with make_database(kind, tmp_path_factory.mktemp(f"db-{kind}")) as database:
        yield database


@pytest.fixture
def db(shared_db: Database) -> Database:
    """A migrated database with no rows, once per backend."""
    reset_database(shared_db)
    return shared_db


@pytest.fixture(autouse=True)
def fast_kdf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(credentials, "DEFAULT_PARAMS", credentials.ScryptParams(n=2**8))


@pytest.fixture
def empty_db(kind: Kind, tmp_path: Path) -> Iterator[Database]:
    """A database with no tables yet, once per backend."""
    with make_database(kind, tmp_path, migrate=False) as database:
        yield database
