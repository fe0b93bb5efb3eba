"""The job list, read and rendered to JSON; a long one in a process of its own.

Every thread of the master shares one interpreter lock. A list of thousands of summaries is Python work from its
first row to its last byte of JSON (OpenPAI's default asks for 5,000; docs/architecture.md): on a reader thread it
holds the lock the writer thread and the event loop need, and while the writer is busy (a burst of submissions)
it waits for the lock in turn. So a list that may hold more than ``IN_PROCESS_LIMIT`` jobs is read by one of
``processes`` list processes (each with its own connection, forked from a fork server that has imported what
they run; started in the background as the master starts), and only its bytes come back. A shorter page costs
less than the trip and stays on a reader thread. ``processes = 0`` (or a database only this process can open:
SQLite in memory) keeps every list on the reader threads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from pai.launcher import queries
from pai.launcher.loop import StoreThread
from pai.launcher.queries import JobFilters
from pai.rest_server.views import summary_view
from pai.store.db import Database

log = logging.getLogger("pai.master.listing")

IN_PROCESS_LIMIT = 1_000  # a page of up to this many jobs is read on a reader thread
WATCHDOG_SECONDS = 1.0  # how often a list process checks that the master is still there


def render_list(db: Database, filters: JobFilters) -> bytes:
    """One page of the job list as the API answers it (OpenPAI's shape; with ``totalCount`` when asked)."""
    page = queries.list_jobs(db, filters)
    data = [summary_view(j) for j in page.jobs]
    return json.dumps(data if page.total is None else {"totalCount": page.total, "data": data}).encode()


_process_db: Database | None = None  # a list process's own connection (set by _open)


def _open(url: str, master: int) -> None:
    global _process_db
    _process_db = Database(url)
    threading.Thread(target=end_with, args=(master,), name="pai-list-watchdog", daemon=True).start()


def end_with(master: int) -> None:
    """A watchdog (a list process's, the front's): end this process when the master has ended, even killed (its
    pool or its signals then cannot tell us)."""
    while True:
        time.sleep(WATCHDOG_SECONDS)
        try:
            os.kill(master, 0)
        except ProcessLookupError:
            os._exit(0)


def _render_here(filters: JobFilters) -> tuple[int, bytes]:
    assert _process_db is not None, "a list process opens its database first"
    return os.getpid(), render_list(_process_db, filters)


class Lists:
    """Where a list is read: a reader thread, or for a long one a list process (see the module's docstring)."""

    def __init__(self, db: Database, store: StoreThread, processes: int) -> None:
        self.db = db
        self.store = store
        self.processes = processes if db.shareable() else 0
        self._pool: ProcessPoolExecutor | None = None
        self.pids: set[int] = set()  # the list processes that have answered

    def start(self) -> None:
        """Start the list processes now, in the background (a cold start takes about a second)."""
        if self.processes and self._pool is None:
            self._start()

    async def render(self, filters: JobFilters) -> bytes:
        if filters.limit <= IN_PROCESS_LIMIT or self.processes == 0:
            return await self.store.read(render_list, self.db, filters)
        pool = self._pool or self._start()
        try:
            pid, body = await asyncio.get_running_loop().run_in_executor(pool, _render_here, filters)
        except BrokenProcessPool:  # a list process died (killed, out of memory): start afresh, answer from here
            log.warning("a list process ended unexpectedly; starting new ones")
            self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            self.pids.clear()
            return await self.store.read(render_list, self.db, filters)
        self.pids.add(pid)
        return body

    def _start(self) -> ProcessPoolExecutor:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        self._pool = ProcessPoolExecutor(self.processes, mp_context=context, initializer=_open,
                                         initargs=(self.db.url.render_as_string(hide_password=False), os.getpid()))
        for _ in range(self.processes):
            self._pool.submit(os.getpid)  # a process pool starts its processes when given work
        log.info("list processes starting processes=%d", self.processes)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
