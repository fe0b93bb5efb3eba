"""Database setup: URL resolution, SQLite pragmas, sessions, and migrations from an empty database."""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from pai.domain.node import Node
from pai.domain.resources import Resources
from pai.store import keyword, migrations, nodes
from pai.store.db import BEGIN_IMMEDIATE, Database, database_url, default_data_dir, is_locked, normalize_url
from pai.store.schema import metadata

from .conftest import Kind, make_database

TABLES = {"users", "tokens", "jobs", "tasks", "task_attempts", "job_events", "nodes", "job_names"}


def test_default_data_dir_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PAI_DATA_DIR", str(tmp_path / "d"))
    assert default_data_dir() == tmp_path / "d"
    monkeypatch.delenv("PAI_DATA_DIR")
    assert default_data_dir() == Path.home() / ".local" / "share" / "pai"


def test_database_url_prefers_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PAI_DATABASE_URL", raising=False)
    assert database_url(tmp_path) == f"sqlite:///{tmp_path}/pai.db"
    monkeypatch.setenv("PAI_DATA_DIR", str(tmp_path / "env"))
    assert database_url() == f"sqlite:///{tmp_path}/env/pai.db"
    monkeypatch.setenv("PAI_DATABASE_URL", "postgresql://u@h/db")
    assert database_url(tmp_path) == "postgresql://u@h/db"


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        pytest.param("postgresql://u:p@h:5432/db", "postgresql+psycopg", id="plain postgresql"),
        pytest.param("postgres://u@h/db", "postgresql+psycopg", id="postgres alias"),
        pytest.param("postgresql+psycopg://u@h/db", "postgresql+psycopg", id="already psycopg"),
        pytest.param("sqlite:////tmp/x.db", "sqlite", id="sqlite untouched"),
    ],
)
def test_normalize_url_pins_psycopg(url: str, driver: str) -> None:
    assert normalize_url(url).drivername == driver


def test_sqlite_creates_data_dir_and_sets_pragmas(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/a/b/pai.db")
    try:
        with db.engine.connect() as c:
            assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10_000
        assert (tmp_path / "a" / "b").is_dir()
    finally:
        db.dispose()


def test_migrate_from_empty_creates_every_table(empty_db: Database) -> None:
    assert empty_db.revision() is None
    assert empty_db.migrate() == migrations.head_revision()
    assert empty_db.revision() == migrations.head_revision()
    assert set(inspect(empty_db.engine).get_table_names()) >= TABLES


def test_migrate_twice_is_harmless(db: Database) -> None:
    with db.session() as s:
        nodes.upsert_node(s, Node("n", "10.0.0.1", Resources(1, 1, 1)))
    db.migrate()
    with db.session() as s:
        assert s.execute(text("SELECT count(*) FROM nodes")).scalar() == 1


def _not_keyword_index(name: str | None, kind: str, _parents: object) -> bool:
    """The keyword index (pai.store.keyword) is no ORM model: FTS5 on SQLite, pg_trgm on PostgreSQL."""
    return not (kind == "table" and name is not None and keyword.is_index_table(name))


def test_migrated_schema_matches_models(db: Database) -> None:
    with db.engine.connect() as c:
        context = MigrationContext.configure(c, opts={"compare_type": True, "include_name": _not_keyword_index})
        diff = compare_metadata(context, metadata)
    assert diff == []


def test_indexes_the_brief_asks_for(db: Database) -> None:
    inspector = inspect(db.engine)
    indexed = {(table, tuple(ix["column_names"])) for table in ("jobs", "tasks") for ix in inspector.get_indexes(table)}
    assert {("jobs", ("state",)), ("jobs", ("vc",)), ("tasks", ("job_id",))} <= indexed


def test_downgrade_to_base_drops_everything(empty_db: Database) -> None:
    empty_db.migrate()
    with empty_db.engine.begin() as c:
        migrations.downgrade(c, "base")
    assert not TABLES & set(inspect(empty_db.engine).get_table_names())
    assert empty_db.revision() is None


def test_session_commits_on_success_and_rolls_back_on_error(db: Database) -> None:
    insert = text("INSERT INTO job_events (job_id, at, kind, message) VALUES ('nope', 0, 'k', 'm')")
    with db.session() as s:
        s.execute(text("DELETE FROM nodes"))
    with pytest.raises(RuntimeError), db.session() as s:
        nodes.upsert_node(s, Node("n", "10.0.0.1", Resources(1, 1, 1)))
        raise RuntimeError("boom")
    with db.session() as s:
        assert s.execute(text("SELECT count(*) FROM nodes")).scalar() == 0
    # Foreign keys are enforced on both backends: an event for a job that does not exist is refused.
    with pytest.raises(IntegrityError, match=r"(?i)foreign key"), db.session() as s:
        s.execute(insert)


def test_make_database_gives_each_caller_its_own_database(kind: Kind, tmp_path: Path) -> None:
    with make_database(kind, tmp_path / "one") as one, make_database(kind, tmp_path / "two") as two:
        with one.session() as s:
            s.execute(text("INSERT INTO users (name, password_hash, created_at) VALUES ('x', 'h', 0)"))
        with two.session() as s:
            assert s.execute(text("SELECT count(*) FROM users")).scalar() == 0


def test_database_made_on_one_thread_serves_a_worker_thread(db: Database) -> None:
    """The master builds the Database at start-up and then calls the store from one worker thread."""

    def work() -> int:
        with db.session() as s:
            nodes.upsert_node(s, Node("w", "10.0.0.2", Resources(1, 1, 1)))
            return len(nodes.list_nodes(s))

    with ThreadPoolExecutor(max_workers=1) as worker:
        assert worker.submit(work).result() == 1
    with db.session() as s:
        assert [n.name for n in nodes.list_nodes(s)] == ["w"]


def test_conninfo_gives_libpq_the_same_database_with_its_password_and_options(tmp_path: Path) -> None:
    db = Database("postgresql://pai:p%40ss%2Fw@db.example:5433/pai?options=-csearch_path%3Dpai_x&sslmode=require")
    try:
        assert conninfo_to_dict(db.conninfo()) == {"user": "pai", "password": "p@ss/w", "host": "db.example",
                                                   "port": "5433", "dbname": "pai", "options": "-csearch_path=pai_x",
                                                   "sslmode": "require"}
    finally:
        db.dispose()
    sqlite = Database(f"sqlite:///{tmp_path / 'pai.db'}")
    try:
        with pytest.raises(ValueError, match="not a PostgreSQL database"):
            sqlite.conninfo()
    finally:
        sqlite.dispose()


@pytest.mark.parametrize("kind", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True)
def test_a_migration_may_sit_idle_longer_than_the_launchers_sessions(shared_db: Database) -> None:
    """The launcher's sessions end when idle in a transaction past the step-down; a migration's own work between
    statements (sealing every job, computing trials' summaries) must not: its transaction is not limited."""
    db = Database(shared_db.engine.url.render_as_string(hide_password=False), idle_in_transaction_seconds=0.3)
    try:
        with db.maintenance() as connection:
            connection.exec_driver_sql("SELECT 1")
            time.sleep(0.8)
            assert connection.exec_driver_sql("SELECT 1").scalar() == 1
        with pytest.raises(DBAPIError, match="idle-in-transaction"), db.session() as s:  # the launcher's: limited
            s.execute(text("SELECT 1"))
            time.sleep(0.8)
            s.execute(text("SELECT 1"))
    finally:
        db.dispose()


def _fill(db: Database, rows: int) -> None:
    """Write about ``rows`` pages: one commit each, as the master's writes are."""
    for i in range(rows):
        with db.session() as s:
            s.execute(text("INSERT INTO scratch (data) VALUES (:data)"), {"data": f"{i}" + "x" * 3000})


def _log_pages(db: Database) -> int:
    """The log's pages now, by a checkpoint that cannot copy any of them (a reader holds the oldest snapshot)."""
    with db.engine.connect() as reader:
        reader.exec_driver_sql("SELECT count(*) FROM scratch").scalar()  # a read transaction, held
        done = db.checkpoint()
        assert done is not None
        return done.frames


@pytest.mark.parametrize("background", [False, True], ids=["commits checkpoint", "background checkpoints"])
def test_background_checkpoints_leave_the_log_to_checkpoint(tmp_path: Path, background: bool) -> None:
    """With ``background_checkpoints`` no commit copies the write-ahead log into the file (SQLite's default does once
    it passes 1,000 pages, and that commit waits for the disk); ``checkpoint`` does, and once it has run with no
    write beside it, the next write starts the log again from its beginning."""
    db = Database(f"sqlite:///{tmp_path / 'pai.db'}", background_checkpoints=background)
    try:
        with db.session() as s:
            s.execute(text("CREATE TABLE scratch (id INTEGER PRIMARY KEY, data TEXT)"))
        with db.engine.connect() as c:
            assert c.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == (0 if background else 1000)
        _fill(db, 1500)
        pages = _log_pages(db)
        if not background:
            assert pages < 1100  # a commit checkpointed it, and the log started again
            return
        assert pages > 1500  # every commit's pages are in the log still
        done = db.checkpoint()
        assert done is not None and not done.busy and done.copied == done.frames == pages
        _fill(db, 10)
        assert _log_pages(db) < 100  # started again from its beginning (else past 1,500 pages)
    finally:
        db.dispose()


def test_a_checkpoint_is_sqlites_alone(kind: Kind, tmp_path: Path) -> None:
    with make_database(kind, tmp_path) as db:
        done = db.checkpoint()
        if kind == "postgresql":
            assert done is None
        else:
            assert done is not None and not done.busy and done.frames >= 0


def test_sqlite_a_connection_asked_to_begin_immediately_takes_the_write_lock_at_its_begin(tmp_path: Path) -> None:
    """``BEGIN_IMMEDIATE``: the transaction holds the file's write lock from its BEGIN (another connection that waits
    for no lock cannot write meanwhile: ``is_locked``); without it a BEGIN takes no lock."""
    db = Database(f"sqlite:///{tmp_path / 'pai.db'}")
    db.migrate()
    other = sqlite3.connect(tmp_path / "pai.db", isolation_level=None)
    other.execute("PRAGMA busy_timeout=0")
    try:
        with db.engine.connect() as plain, plain.begin():
            other.execute("BEGIN IMMEDIATE")  # free: a plain BEGIN locks nothing
            other.rollback()
        with db.engine.connect().execution_options(**{BEGIN_IMMEDIATE: True}) as c, c.begin():
            with pytest.raises(sqlite3.OperationalError) as raised:
                other.execute("BEGIN IMMEDIATE")
            assert is_locked(raised.value)
            assert is_locked(DBAPIError(None, None, raised.value))  # SQLAlchemy's wrapping too
        other.execute("BEGIN IMMEDIATE")  # let go at the end of the transaction
        other.rollback()
    finally:
        other.close()
        db.dispose()
    with pytest.raises(sqlite3.OperationalError) as other_error:
        sqlite3.connect(":memory:").execute("SELECT * FROM nowhere")
    assert not is_locked(other_error.value) and not is_locked(sqlite3.OperationalError("database is locked"))
    assert not is_locked(ValueError("locked"))
