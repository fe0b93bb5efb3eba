"""Where the store's transactions run, off the event loop: one writer thread for every transaction that writes
(and, on SQLite, the event loop in its stead for a short one while it is idle), a pool of reader threads for the
others."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import queue
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar, cast

P = ParamSpec("P")
R = TypeVar("R")


READERS = 4


class StoreThread:
    """Where store transactions run, off the event loop.

    ``call``: every transaction that writes runs on one thread, so writes are serialised (SQLite has a single
    writer, and the order of changes is the order of requests); the scheduling pass and the agents' heartbeats
    are such writes. ``read``: read-only transactions (lists, details, token checks) run on a pool of reader
    threads, each with its own connection, and never wait for a write to finish: SQLite in WAL mode and
    PostgreSQL both let a reader see the last committed state while a writer works."""

    def __init__(self, readers: int = READERS) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pai-store")
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="pai-read")
        # told, for each call, what it was (its function's qualified name) and how long it held the writer thread
        # (``pai_store_writer_seconds``); set by the app once the launcher's metrics exist
        self.observe: Callable[[str, float], None] | None = None
        # calls given to the writer thread (counted on the event loop) and calls it has finished (counted on the
        # writer thread): equal when it runs none and none waits for it (``idle``)
        self._given = self._finished = 0
        # calls that go before those waiting (``call_first``): each with the future its caller awaits
        self._first: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]] = queue.SimpleQueue()

    def _work(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> Callable[[], R]:
        """``fn`` with its arguments, timed for ``observe`` if there is one."""
        work = functools.partial(fn, *args, **kwargs)
        return functools.partial(_timed, self.observe, _name(fn), work) if self.observe is not None else work

    async def call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn`` (a transaction that may write) on the writer thread."""
        work = self._work(fn, *args, **kwargs)
        self._given += 1
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(self._counted, work))

    async def call_first(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``call``, ahead of the calls waiting for the writer thread: it waits only for the one running (a trial's
        reports: a rung's stops and new trials, a call each, come one after another, and a report that came after
        the next one was given would wait for both)."""
        work: Callable[[], object] = self._work(fn, *args, **kwargs)
        done: Future[object] = Future()
        self._given += 1
        self._first.put((work, done))
        self._pool.submit(self._run_first)  # taken at once by an idle writer; else by the next call's turn
        return cast(R, await asyncio.wrap_future(done))

    def _run_first(self) -> None:
        """On the writer thread: the ``call_first`` calls waiting, in the order they came."""
        with contextlib.suppress(queue.Empty):
            while True:
                work, done = self._first.get_nowait()
                try:
                    if done.set_running_or_notify_cancel():
                        try:
                            done.set_result(work())
                        except BaseException as e:  # the caller's to see
                            done.set_exception(e)
                finally:
                    self._finished += 1

    def _counted(self, work: Callable[[], R]) -> R:
        """On the writer thread: the ``call_first`` calls waiting, then ``work``, then counted finished (whether it
        failed or not)."""
        self._run_first()
        try:
            return work()
        finally:
            self._finished += 1

    def idle(self) -> bool:
        """Whether the writer thread runs no call and none waits for it (asked on the event loop)."""
        return self._given == self._finished

    def here(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn`` (a short transaction that may write) on the calling thread, the event loop's, in the writer's
        stead: only while the writer thread is ``idle``, so that writes stay one at a time and in order (nothing can
        be given to the writer thread until ``fn`` returns: only the event loop gives it work). Told to ``observe``
        as a writer call is. Saves the trip to the writer thread and back (ADR 0003, addendum 2); for SQLite only,
        whose transactions wait on no network."""
        if not self.idle():
            raise RuntimeError("the writer thread is busy: a call here would write beside it")
        return self._work(fn, *args, **kwargs)()

    async def read(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn`` (a transaction that only reads, or other work that must not hold the event loop) on a reader
        thread."""
        return await asyncio.get_running_loop().run_in_executor(self._readers, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._readers.shutdown(wait=True)
        self._pool.shutdown(wait=True)


def _timed(observe: Callable[[str, float], None], name: str, work: Callable[[], R]) -> R:
    """On the writer thread: ``work``, then how long it took (failed or not) to ``observe``."""
    began = time.perf_counter()
    try:
        return work()
    finally:
        observe(name, time.perf_counter() - began)


def _name(fn: Callable[..., object]) -> str:
    """What a writer call is called in the metrics: its function's qualified name (a partial's function's)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__qualname__", type(fn).__qualname__)
