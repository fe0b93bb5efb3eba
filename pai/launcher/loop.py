"""The async shell around the launcher: the store's threads, and the snapshot -> schedule -> persist loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import queue
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import ParamSpec, TypeVar, cast

from pai.domain.errors import FencedError, NotLeaderError
from pai.launcher.decider import Decider
from pai.launcher.experiments import slices
from pai.launcher.role import Role
from pai.launcher.service import Launcher
from pai.protocol.messages import AgentRequest, HeartbeatRequest, MasterReply, RegisterRequest

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
        # told, for each call, what it was (its function's qualified name) and how long it held the writer thread
        # (``pai_store_writer_seconds``); set by the app once the launcher's metrics exist
        self.observe: Callable[[str, float], None] | None = None
        # calls given to the writer thread (counted on the event loop) and calls it has finished (counted on the
        # writer thread): equal when it runs none and none waits for it (``idle``)
        self._given = self._finished = 0
        # calls that go before those waiting (``call_first``): each with the future its caller awaits
        self._first: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]] = queue.SimpleQueue()

    async def call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn`` (a transaction that may write) on the writer thread."""
        work = functools.partial(fn, *args, **kwargs)
        if self.observe is not None:
            work = functools.partial(_timed, self.observe, _name(fn), work)
        self._given += 1
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(self._counted, work))

    async def call_first(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``call``, ahead of the calls waiting for the writer thread: it waits only for the one running (a trial's
        reports: a rung's stops and new trials, a call each, come one after another, and a report that came after
        the next one was given would wait for both)."""
        work: Callable[[], object] = functools.partial(fn, *args, **kwargs)
        if self.observe is not None:
            work = functools.partial(_timed, self.observe, _name(fn), work)
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
        work = functools.partial(fn, *args, **kwargs)
        return _timed(self.observe, _name(fn), work) if self.observe is not None else work()

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


Notify = Callable[[set[str]], Awaitable[None]]


class LauncherLoop:
    def __init__(self, launcher: Launcher, store: StoreThread, tick_seconds: float = 0.5,
                 notify: Notify | None = None, role: Role | None = None, decider: Decider | None = None) -> None:
        """``notify``: called after every pass with the nodes whose tasks changed (the agent channels poke
        those agents, so that starts and stops reach them now, not at their next heartbeat). ``role``: whether
        this launcher leads (a standby runs no pass and answers no agent: NotLeaderError); default: it leads.
        ``decider``: where the searcher decides (its process starts with the first decision; the owner of the
        loop closes it)."""
        self.launcher = launcher
        self.decider = decider or Decider()
        self.role = role or Role()
        self.store = store
        self.tick_seconds = tick_seconds
        self.notify = notify
        self._wake = asyncio.Event()
        self._checked = -math.inf
        self._sampled = time.monotonic()  # every VC's usage is sampled (Launcher.usage) once an interval has passed
        self.passes = 0
        # agent messages waiting for the writer thread: put on the event loop, taken on the writer thread
        self._waiting: queue.SimpleQueue[tuple[AgentRequest, asyncio.Future[MasterReply]]] = queue.SimpleQueue()
        self._batching: asyncio.Task[None] | None = None

    def wake(self) -> None:
        """Run a pass now (a job was submitted, a task ended, a node joined)."""
        self._wake.set()

    async def heartbeat(self, req: HeartbeatRequest) -> MasterReply:
        """An agent's heartbeat. One that reports what the master expects is answered at once, from memory; the
        others wait for the writer thread (``_handle``). Raises NoNodeError for a node that never registered,
        NotLeaderError on a standby."""
        self.role.require()
        reply = self.launcher.quiet_heartbeat(req)
        return reply if reply is not None else await self._handle(req)

    async def register(self, req: RegisterRequest) -> MasterReply:
        """An agent's registration (``_handle``); a pass follows, for the node's capacity. Like a heartbeat, it
        shows the node alive when it arrives."""
        self.role.require()
        self.launcher.heartbeats.arrived(req.node_name, self.launcher.clock())
        reply = await self._handle(req)
        self.wake()
        return reply

    async def _handle(self, req: AgentRequest) -> MasterReply:
        """Wait for the writer thread, which handles every agent message waiting when it gets to them (those that
        came during a pass, a thousand agents starting at once) in one transaction (``Launcher.agent_batch``)."""
        done: asyncio.Future[MasterReply] = asyncio.get_running_loop().create_future()
        self._waiting.put((req, done))
        if self._batching is None:
            self._batching = asyncio.create_task(self._batches(), name="agent messages")
        return await done

    async def _batches(self) -> None:
        try:
            while not self._waiting.empty():
                try:
                    answered = await self.store.call(self._batch)
                except Exception as e:  # the writer thread is gone (shutting down): none waits for ever
                    answered = []
                    with contextlib.suppress(queue.Empty):
                        while True:
                            answered.append((self._waiting.get_nowait()[1], e))
                if any(isinstance(reply, FencedError) for _, reply in answered):  # the lease has moved on
                    await self.role.fenced()
                for done, reply in answered:
                    if done.done():  # the agent went away
                        continue
                    if isinstance(reply, FencedError):
                        done.set_exception(NotLeaderError(self.role.leader))
                    elif isinstance(reply, Exception):
                        done.set_exception(reply)
                    else:
                        done.set_result(reply)
        finally:
            self._batching = None

    def _batch(self) -> list[tuple[asyncio.Future[MasterReply], MasterReply | Exception]]:
        """On the writer thread: every agent message waiting now, in one transaction; each with its reply or error."""
        batch: list[tuple[AgentRequest, asyncio.Future[MasterReply]]] = []
        with contextlib.suppress(queue.Empty):
            while True:
                batch.append(self._waiting.get_nowait())
        try:
            replies: list[MasterReply | Exception] = [*self.launcher.agent_batch([req for req, _ in batch])]
        except Exception as e:  # each of them gets the error (a 500)
            replies = [e] * len(batch)
        return [(done, reply) for (_, done), reply in zip(batch, replies, strict=True)]

    async def _sample(self) -> None:
        if (now := time.monotonic()) - self._sampled < self.launcher.config.usage_sample_seconds:
            return
        self._sampled = now
        try:
            await self.store.call(self.launcher.usage.sample)
        except Exception:  # a chart's sample is not worth a pass
            log.exception("VC usage sample failed")

    async def _search(self) -> None:
        """The experiments' step (pai.launcher.experiments): trials follow their jobs; the searcher decides, in its
        own process (``Decider``), for each experiment whose trials changed; each decision is applied on the writer
        thread."""
        runner = self.launcher.experiments
        try:
            await self.store.call(runner.follow_jobs)
            works = await self.store.read(runner.pending)
            if not works:
                return
            classes, _ = await self.store.read(self.launcher.submission_rules)
            for work in works:
                began = time.perf_counter()
                decision = await self.decider.decide(work.experiment, work.trials, work.row.id)
                self.launcher.metrics.decide_seconds.labels(work.experiment.searcher.name.value).observe(
                    time.perf_counter() - began)
                for part in slices(decision):  # a transaction each: the writer is free between them
                    applied = await self.store.call(runner.apply, work, part, classes)
                    if applied.submitted:
                        self.wake()  # new trials' jobs: a pass now
                    if applied.progress is None:
                        break
                    work = replace(work, progress=applied.progress)
        except FencedError:
            raise
        except Exception:  # a search that cannot go on is not worth the scheduler: logged, tried again next tick
            log.exception("experiments step failed")

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):  # asyncio.timeout: wait_for may lose a cancellation (3.11)
                async with asyncio.timeout(self.tick_seconds):
                    await self._wake.wait()
            self._wake.clear()
            if not self.role.leading:  # a standby: no pass, no push, no node timed out; what the users' requests
                self.launcher.scheduling.take_changed()  # marked changed, and what it heard from other processes,
                self.launcher.inbox.take()  # is the leader's (it reloads once elected)
                continue
            try:
                if (now := time.monotonic()) - self._checked >= self.tick_seconds:  # silent nodes: once a tick
                    self._checked = now
                    await self.store.call(self.launcher.check_nodes)
                await self.store.call(self.launcher.schedule_pass)
                self.passes += 1
                await self._sample()
                await self._search()
                if self.launcher.scheduling.postponed:  # admissions left for the next pass: run it soon (the
                    self.wake()  # agent messages that came meanwhile go first: the writer thread takes turns)
                touched = await self.store.call(self.launcher.take_touched)
                if touched and self.notify is not None:
                    await self.notify(touched)
            except FencedError as e:  # another master leads now: this one steps down, its pass rolled back
                log.warning("scheduling pass fenced off: %s", e)
                await self.role.fenced()
            except Exception:  # the loop must survive a bad pass; the error is logged with its traceback
                log.exception("scheduling pass failed")
