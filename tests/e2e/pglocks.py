"""Freezing a master as a whole process group (SIGSTOP) at a chosen point of its talk with PostgreSQL, as the server
sees it (``pg_locks``, ``pg_stat_activity``): outside its transactions, or inside a fenced write (the leader's writes
hold the lease row ``FOR SHARE`` until they end). A master frozen inside a transaction keeps its locks while frozen:
PostgreSQL sees a session idle in a transaction. The schema is the one of the database URL given (its search_path)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, create_engine, text

from pai.store.db import normalize_url
from tests.e2e.ha import Ha

# The sessions (not this one) whose transaction holds a lock on a table of this connection's schema, and whether it is
# the lease table FOR SHARE (RowShareLock): a fenced write of the leader.
_HOLDERS = text("""
    SELECT l.pid, a.state, a.xact_start, l.relation = to_regclass('leases') AND l.mode = 'RowShareLock' AS fenced
    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid JOIN pg_class c ON c.oid = l.relation
    WHERE l.locktype = 'relation' AND c.relnamespace = to_regnamespace(current_schema()) AND l.pid <> pg_backend_pid()
""")


@contextmanager
def observer(database_url: str) -> Iterator[Connection]:
    engine = create_engine(normalize_url(database_url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


def holders(connection: Connection) -> set[tuple[int, object]]:
    """(pid, transaction start) of the sessions in a transaction that holds a table of the schema: idle in it, or
    running a statement (one a frozen client does not read the answer of, or one waiting for a frozen one's lock)."""
    return {(r.pid, r.xact_start) for r in connection.execute(_HOLDERS) if r.xact_start is not None}


def fenced_writers(connection: Connection) -> set[int]:
    """The sessions in a fenced write: their transaction holds the lease row FOR SHARE."""
    return {r.pid for r in connection.execute(_HOLDERS) if r.fenced}


def frozen_holders(connection: Connection) -> set[int]:
    """The sessions that stay in the same transaction holding a table of the schema for 0.2 s: a frozen master's, or
    a live one's that waits for a frozen one's lock (a live master's transactions last milliseconds). Not only those
    idle in it: a statement the master had sent may still run (a loaded machine), and it ends in the transaction."""
    time.sleep(0.05)
    first = holders(connection)
    if not first:
        return set()
    time.sleep(0.2)
    return {pid for pid, _ in first & holders(connection)}


def freeze_outside_transactions(ha: Ha, name: str, database_url: str, tries: int = 50) -> None:
    """SIGSTOP the master ``name`` outside its transactions: at a moment when it holds no table of the schema (thawed
    and frozen again until then)."""
    with observer(database_url) as connection:
        for _ in range(tries):
            ha.signal(name, signal.SIGSTOP)
            if not frozen_holders(connection):
                return
            ha.signal(name, signal.SIGCONT)
            time.sleep(0.05)  # let it finish that transaction
    raise AssertionError(f"{name} was inside a transaction each of the {tries} times it was frozen")


def freeze_inside_a_fenced_write(ha: Ha, name: str, database_url: str, seconds: float = 30.0) -> int:
    """SIGSTOP the master ``name`` while its session holds the lease row FOR SHARE (a fenced write of the leader);
    the session's pid. Catching it there takes polling: its fenced writes last milliseconds."""
    deadline = time.monotonic() + seconds
    with observer(database_url) as connection:
        while time.monotonic() < deadline:
            if not fenced_writers(connection):
                continue
            ha.signal(name, signal.SIGSTOP)
            held = frozen_holders(connection) & fenced_writers(connection)
            if held:
                return held.pop()
            ha.signal(name, signal.SIGCONT)
    raise AssertionError(f"{name} was never caught inside a fenced write in {seconds} s")
