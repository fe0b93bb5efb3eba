"""The async shell around the launcher: the snapshot -> schedule -> persist loop (the store's threads:
``pai.launcher.storethread``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import queue
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from pai.domain.errors import FencedError, NotLeaderError
from pai.launcher.decider import Decider
from pai.launcher.experiments import slices
from pai.launcher.role import Role
from pai.launcher.service import Launcher
from pai.launcher.storethread import StoreThread
from pai.protocol.messages import AgentRequest, HeartbeatRequest, MasterReply, RegisterRequest

log = logging.getLogger("pai.launcher.loop")


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
