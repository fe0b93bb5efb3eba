"""Where the database lives and how to talk to it: URL resolution, engine setup, sessions, migrations.

Every store function takes a ``Session`` first; ``Database.session()`` hands one out that commits on
success and rolls back on error. The master calls the store from one worker thread; nothing here is async.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Connection, Engine, create_engine, event, make_url
from sqlalchemy.orm import Session, sessionmaker

from pai.store import keyring as keyrings
from pai.store import migrations
from pai.store.keyring import Keyring
from pai.store.private import private_sqlite
from pai.store.sealing import KEYRING_INFO

DATA_DIR_ENV = "PAI_DATA_DIR"
DATABASE_URL_ENV = "PAI_DATABASE_URL"
SQLITE_BUSY_TIMEOUT_MS = 10_000
# a connection's execution option: on SQLite its transactions take the file's write lock at their BEGIN (waiting for
# it as long as the busy timeout says), not at their first write (where a transaction that has read fails at once
# if another connection holds it: SQLite cannot wait there without risking a deadlock); for transactions that write
BEGIN_IMMEDIATE = "pai_begin_immediate"
# Any constant will do: it only keeps two masters from migrating the same PostgreSQL database at once.
_PG_MIGRATION_LOCK = 0x7061695F6D6967


def default_data_dir() -> Path:
    """``$PAI_DATA_DIR``, else ``~/.local/share/pai``."""
    configured = os.environ.get(DATA_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".local" / "share" / "pai"


def database_url(data_dir: Path | None = None) -> str:
    """``$PAI_DATABASE_URL`` when set, else a SQLite file ``pai.db`` in the data directory."""
    configured = os.environ.get(DATABASE_URL_ENV)
    if configured:
        return configured
    directory = data_dir if data_dir is not None else default_data_dir()
    return f"sqlite:///{directory / 'pai.db'}"


def normalize_url(url: str) -> URL:
    """Pin PostgreSQL URLs to psycopg 3: ``postgresql://`` and ``postgres://`` become ``postgresql+psycopg://``."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


class Database:
    """One engine and its session factory. Create one per process; ``dispose()`` on shutdown.

    ``keyring`` seals and opens job secrets (``pai.store.sealing``; its sessions carry it in ``Session.info``): the
    master has one; a process that only reads (the read front, list processes) needs none. A SQLite file and its
    ``-wal``/``-shm`` are mode 0600 in a 0700 directory, whatever the umask."""

    def __init__(self, url: str, keyring: Keyring | None = None, *,
                 idle_in_transaction_seconds: float | None = None, background_checkpoints: bool = False) -> None:
        """``idle_in_transaction_seconds`` (PostgreSQL): the server ends a session of this engine that stays that long
        in a transaction without a statement (its process frozen, cut off), so that the locks it holds, such as the
        lease row a fenced write keeps, do not outlive it. ``background_checkpoints`` (SQLite): no commit of this
        engine's checkpoints the write-ahead log; the caller runs ``checkpoint`` on a thread of its own, regularly
        (ADR 0005: a commit that checkpointed waited 60-290 ms for the disk, with the writer thread and every write
        behind it)."""
        self.url = normalize_url(url)
        self.keyring = keyring
        self.engine: Engine = _create_engine(self.url, idle_in_transaction_seconds, background_checkpoints)
        self._unit = threading.local()  # the unit of work open in a thread, if any (``unit``)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False,
                                      info={} if keyring is None else {KEYRING_INFO: keyring})

    def use_keyring(self, keyring: Keyring) -> None:
        """Seal and open job secrets with ``keyring`` from now on (sessions opened before keep what they had)."""
        self.keyring = keyring
        self._sessions.configure(info={KEYRING_INFO: keyring})

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def conninfo(self) -> str:
        """The database as a libpq connection string, for a connection of its own outside the engine (the launcher's
        listener: ``LISTEN`` needs one that stays open). PostgreSQL only (ValueError otherwise)."""
        if self.dialect != "postgresql":
            raise ValueError(f"url: {self!r} is not a PostgreSQL database")
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)

    def shareable(self) -> bool:
        """Whether another process can open this database (SQLite in memory cannot)."""
        name = self.url.database or ""
        return self.dialect != "sqlite" or not (name in ("", ":memory:") or "mode=memory" in name)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in a transaction: committed when the block ends, rolled back if it raises. Inside a ``unit`` of
        this thread it is the unit's session, in a SAVEPOINT: what the block did is undone if it raises, and the rest
        commits or rolls back with the unit."""
        unit: Session | None = getattr(self._unit, "session", None)
        if unit is not None:
            if getattr(self._unit, "read_only", False):  # a read has nothing to undo: no SAVEPOINT round trips
                yield unit
                return
            with unit.begin_nested():
                yield unit
            return
        with self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def unit(self, *, read_only: bool = False) -> Iterator[Session]:
        """One transaction for everything this thread does in the block (a request: its caller's check and its
        operation): ``session`` joins it. ``read_only`` (the block only reads): its sessions join it without a
        SAVEPOINT each, since a read that fails has nothing to undo. Units do not nest."""
        if getattr(self._unit, "session", None) is not None:
            raise RuntimeError("a unit of work is open in this thread already")
        with self._sessions() as session, session.begin():
            self._unit.session, self._unit.read_only = session, read_only
            try:
                yield session
            finally:
                self._unit.session, self._unit.read_only = None, False

    @contextmanager
    def maintenance(self) -> Iterator[Connection]:
        """One transaction that no other's migration (a master starting) or key rotation runs beside: on PostgreSQL
        they take the same lock; SQLite has one writer anyway."""
        with self.engine.begin() as connection:
            if self.dialect == "postgresql":
                # a migration's own work between statements (sealing every job, computing trials' summaries) may take
                # longer than the launcher's sessions may sit idle in a transaction: not limited here
                connection.exec_driver_sql("SET LOCAL idle_in_transaction_session_timeout = 0")
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
            yield connection

    def migrate(self) -> str:
        """Bring the schema to head (in one transaction; the migrations that seal secrets use the keyring), then
        check that the keyring opens what this database has sealed (SecretKeyError); returns the head revision."""
        with self.maintenance() as connection:
            migrations.upgrade(connection, keyring=self.keyring)
            if self.keyring is not None:
                keyrings.verify(connection, self.keyring)
        return migrations.head_revision()

    def revision(self) -> str | None:
        """The schema revision the database is at (None: never migrated)."""
        with self.engine.connect() as connection:
            return migrations.current_revision(connection)

    def checkpoint(self) -> Checkpoint | None:
        """SQLite: copy what the write-ahead log holds into the database file, as far as no reader needs it still
        (``PRAGMA wal_checkpoint(PASSIVE)``: it waits for no reader and no writer, and writers go on meanwhile); what
        it came to. None on another database. Blocks on the disk: call it off the writer thread."""
        if self.dialect != "sqlite":
            return None
        raw = self.engine.raw_connection()
        try:
            busy, frames, copied = raw.driver_connection.execute(  # type: ignore[union-attr]
                "PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            raw.close()
        return Checkpoint(bool(busy), int(frames), int(copied))

    def dispose(self) -> None:
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"Database({self.url.render_as_string(hide_password=True)!r})"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What a checkpoint came to: whether it could not run (another one was running), the log's frames (-1: not in
    WAL mode) and how many of them are in the database file now."""

    busy: bool
    frames: int
    copied: int


def _create_engine(url: URL, idle_in_transaction_seconds: float | None = None,
                   background_checkpoints: bool = False) -> Engine:
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url, background_checkpoints)
    if idle_in_transaction_seconds is None:
        return create_engine(url, pool_pre_ping=True)
    timeout = f"-c idle_in_transaction_session_timeout={max(1, round(idle_in_transaction_seconds * 1000))}"
    given = url.query.get("options", "")  # the URL's own (a search_path, say) are kept
    options = " ".join([*(given if isinstance(given, tuple) else (given,)), timeout]).strip()
    return create_engine(url.update_query_dict({"options": options}), pool_pre_ping=True)


def is_locked(error: BaseException) -> bool:
    """Whether ``error`` (the driver's, or SQLAlchemy's around it) is SQLite's SQLITE_BUSY: another connection holds
    the lock the statement needed, and the busy timeout passed (at once on a connection whose timeout is 0)."""
    cause = getattr(error, "orig", error)
    code = getattr(cause, "sqlite_errorcode", 0) if isinstance(cause, sqlite3.OperationalError) else 0
    return (code & 0xFF) == sqlite3.SQLITE_BUSY


def _sqlite_engine(url: URL, background_checkpoints: bool) -> Engine:
    if url.database and url.database != ":memory:" and not url.database.startswith("file:"):
        private_sqlite(Path(url.database).expanduser())
    engine = create_engine(url)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take over BEGIN from the sqlite3 module so that SAVEPOINTs and DDL are transactional.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA synchronous=NORMAL")
            if background_checkpoints:  # else the commit that takes the log past 1,000 pages checkpoints it
                cursor.execute("PRAGMA wal_autocheckpoint=0")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # on the driver's connection, not through SQLAlchemy's execution of a statement (ADR 0003, addendum)
        immediate = connection.get_execution_options().get(BEGIN_IMMEDIATE, False)
        connection.connection.driver_connection.execute(  # type: ignore[union-attr]
            "BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine
