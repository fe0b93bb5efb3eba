"""A trial's reports, batched: those that wait for the writer thread together are stored in one transaction.

Reports are an experiment's hottest write (100 trials reporting 10 times a second are 1,000 a second) and each
alone is a transaction: its token's lookup, an insert, its trial's count, a commit. On SQLite every write goes
through one writer thread (``StoreThread.call``), so a report waits for the ones before it anyway: while one batch
is in the writer, the next ones gather, and go together (``pai.store.trial_reports.report_many``: one lookup of
their tokens, one insert, one update per trial). No report waits for a timer: a report that comes to an idle
writer goes alone at once. ADR 0003 says what it costs and what it buys.

A report whose token is no trial's (a user's, or nobody's) is answered by the service facade as any request is
(its 401 or 403); so is one whose body does not pass the checks (the facade checks its token first).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sqlalchemy.engine import Connection

from pai.launcher.storethread import StoreThread
from pai.store.db import BEGIN_IMMEDIATE, Database, is_locked
from pai.store.trial_reports import Incoming, Outcome, report_many

log = logging.getLogger(__name__)
MAX_BATCH = 1_000  # reports in one transaction at most


class ReportBatcher:
    def __init__(self, store: StoreThread, db: Database, observe: Callable[[float], None] | None = None) -> None:
        """``observe``: told each transaction's number of reports (``pai_trial_report_batch_size``)."""
        self.store, self.db, self._observe = store, db, observe
        self._waiting: list[tuple[Incoming, asyncio.Future[Outcome | Exception]]] = []
        self._draining: asyncio.Task[None] | None = None
        self._connection: Connection | None = None  # SQLite: the batches' connection (``_store``)
        self._here_connection: Connection | None = None  # SQLite: those stored on the event loop (``_store_here``)
        self.batches = 0  # transactions so far (the tests and the benchmark read it)

    async def submit(self, item: Incoming) -> Outcome | Exception:
        """What storing ``item`` came to: its answer, or why it was not stored (an exception, returned)."""
        done: asyncio.Future[Outcome | Exception] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, done))
        if self._draining is None:
            self._draining = asyncio.create_task(self._drain(), name="trial reports")
        return await done

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
                items = [item for item, _ in batch]
                try:
                    stored = await self._stored(items)
                    outcomes: list[Outcome | Exception] = [*stored]
                except Exception as e:  # the database failed the transaction: each report gets the error (a 500)
                    log.warning("trial reports not stored reports=%d error=%r", len(items), e)
                    outcomes = [e] * len(items)
                self.batches += 1
                if self._observe is not None:
                    self._observe(len(items))
                for (_, done), outcome in zip(batch, outcomes, strict=True):
                    if not done.done():  # the trial went away meanwhile
                        done.set_result(outcome)
        finally:
            self._draining = None

    async def _stored(self, items: list[Incoming]) -> list[Outcome]:
        """``items`` stored: on SQLite while the writer thread is idle, on the event loop in its stead
        (``StoreThread.here``: a batch of a few reports costs less than the trip to that thread and back); else, or
        if another process holds the file's write lock, on the writer thread, ahead of the calls waiting for it."""
        if self.db.dialect == "sqlite" and self.store.idle():
            try:
                return self.store.here(self._store_here, items)
            except Exception as e:
                if not is_locked(e):
                    raise
                log.info("trial reports wait for the database file's lock reports=%d", len(items))
        return await self.store.call_first(self._store, items)

    def _store_here(self, items: list[Incoming]) -> list[Outcome]:
        """On the event loop (SQLite): on a connection of its own that waits for no lock (``busy_timeout=0``: the
        loop must not wait for another process's write), given up after a failure, never back to the pool."""
        if self._here_connection is None:
            connection = self.db.engine.connect().execution_options(**{BEGIN_IMMEDIATE: True})
            connection.connection.driver_connection.execute("PRAGMA busy_timeout=0")  # type: ignore[union-attr]
            self._here_connection = connection
        try:
            with self._here_connection.begin():
                return report_many(self._here_connection, items)
        except Exception:
            self._close_here()
            raise

    def _close_here(self) -> None:
        connection, self._here_connection = self._here_connection, None
        if connection is not None:
            connection.invalidate()  # its busy timeout is not the engine's: closed, not pooled
            connection.close()

    def _store(self, items: list[Incoming]) -> list[Outcome]:
        """On the writer thread. SQLite: on a connection of the batcher's own, kept between batches (no pool checkout
        and return each time: ADR 0003, addendum); PostgreSQL: one from the pool each time (a connection kept would
        outlive a server restart)."""
        if self.db.dialect != "sqlite":
            with self.db.engine.begin() as c:
                return report_many(c, items)
        if self._connection is None:  # a batch writes: it waits for the file's lock at its BEGIN
            self._connection = self.db.engine.connect().execution_options(**{BEGIN_IMMEDIATE: True})
        try:
            with self._connection.begin():
                return report_many(self._connection, items)
        except Exception:
            self._close_kept()  # a fresh one for the next batch
            raise

    def _close_kept(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def close(self) -> None:
        """On the writer thread, before the database is disposed: the connection kept, if any, back to the pool (the
        event loop's closed)."""
        self._close_kept()
        self._close_here()
