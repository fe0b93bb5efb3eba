"""The async shell around the launcher: the store's threads, and the snapshot -> schedule -> persist loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from pai.launcher.service import Launcher

log = logging.getLogger("pai.launcher.loop")
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

    async def call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn`` (a transaction that may write) on the writer thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    async def read(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn`` (a transaction that only reads) on a reader thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, lambda: fn(*args, **kwargs))

    def close(self) -> None:
        self._readers.shutdown(wait=True)
        self._pool.shutdown(wait=True)


Notify = Callable[[set[str]], Awaitable[None]]


class LauncherLoop:
    def __init__(self, launcher: Launcher, store: StoreThread, tick_seconds: float = 0.5,
                 notify: Notify | None = None) -> None:
        """``notify``: called after every pass with the nodes whose tasks changed (the agent channels poke
        those agents, so that starts and stops reach them now, not at their next heartbeat)."""
        self.launcher = launcher
        self.store = store
        self.tick_seconds = tick_seconds
        self.notify = notify
        self._wake = asyncio.Event()
        self._checked = -math.inf
        self.passes = 0

    def wake(self) -> None:
        """Run a pass now (a job was submitted, a task ended, a node joined)."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):  # asyncio.timeout: wait_for may lose a cancellation (3.11)
                async with asyncio.timeout(self.tick_seconds):
                    await self._wake.wait()
            self._wake.clear()
            try:
                if (now := time.monotonic()) - self._checked >= self.tick_seconds:  # silent nodes: once a tick
                    self._checked = now
                    await self.store.call(self.launcher.check_nodes)
                await self.store.call(self.launcher.schedule_pass)
                self.passes += 1
                touched = await self.store.call(self.launcher.take_touched)
                if touched and self.notify is not None:
                    await self.notify(touched)
            except Exception:  # the loop must survive a bad pass; the error is logged with its traceback
                log.exception("scheduling pass failed")
