"""Which master's launcher leads: a pure core over the lease's answers, and a small async shell that asks for them.

Kueue's figures (docs/adr/0001-master-topology.md): the leader renews its lease every 2 s, the lease lasts 15 s, and
the leader steps down once 10 s have passed since the last renewal that succeeded was *asked*, whether the database
said no, failed or did not answer. The 10 s run on this machine's monotonic clock and the 15 s on the database's, so
a leader stops acting at least 5 s before another can take the lease, whatever the two clocks read.

The core (``on_tick``) takes what one attempt came back with and returns the new state and what to do (``Elected``,
``Deposed``); it knows nothing of time but the ``now`` it is given. An answer to an attempt asked in another term (a
renewal that comes back after its leader stepped down) is no news: a standby becomes leader only by acquiring, which
starts a new term at a new epoch.

The shell (``Elector``) asks the store on a thread of its own every ``renew_every`` seconds, never two attempts at
once, and awaits ``on_elected(epoch)`` / ``on_deposed()``. Stopped (cancelled) while leading, it steps down and
releases the lease so that a standby takes over at once. ``pai master`` runs one (``pai.rest_server.leading``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pai.store import leases
from pai.store.db import Database
from pai.store.leases import LeaseState

log = logging.getLogger("pai.launcher.leadership")


@dataclass(frozen=True, slots=True)
class Timing:
    renew_every: float = 2.0
    lease_seconds: float = 15.0
    step_down_after: float = 10.0

    def __post_init__(self) -> None:
        if not 0 < self.renew_every < self.step_down_after < self.lease_seconds:
            raise ValueError(f"a lease needs 0 < renew_every < step_down_after < lease_seconds, not {self}")


@dataclass(frozen=True, slots=True)
class Leadership:
    epoch: int | None = None  # the epoch this launcher leads at; None: standby
    renewed_at: float | None = None  # when the last renewal that succeeded was asked (leader only)


# What one attempt came back with; ``asked``: the epoch it renewed, None when it acquired.
@dataclass(frozen=True, slots=True)
class Held:
    asked: int | None
    epoch: int
    at: float  # when it was asked


@dataclass(frozen=True, slots=True)
class Taken:
    asked: int | None
    holder: str  # "" when released
    epoch: int


@dataclass(frozen=True, slots=True)
class Failed:
    asked: int | None
    reason: str


Outcome = Held | Taken | Failed


@dataclass(frozen=True, slots=True)
class Elected:
    epoch: int


@dataclass(frozen=True, slots=True)
class Deposed:
    epoch: int
    reason: str


Action = Elected | Deposed
STANDBY = Leadership()


def outcome(lease: LeaseState, holder: str, asked: int | None, at: float) -> Outcome:
    """What the store's answer to ``holder``'s attempt means."""
    if lease.held_by(holder):
        return Held(asked, lease.epoch, at)
    return Taken(asked, lease.holder, lease.epoch)


def on_tick(state: Leadership, result: Outcome, now: float, timing: Timing) -> tuple[Leadership, list[Action]]:
    if state.epoch is None or state.renewed_at is None:
        if isinstance(result, Held) and result.asked is None:
            return Leadership(result.epoch, result.at), [Elected(result.epoch)]
        return STANDBY, []
    epoch = state.epoch
    if result.asked == epoch:
        if isinstance(result, Held) and result.epoch == epoch:
            return Leadership(epoch, max(state.renewed_at, result.at)), []
        if isinstance(result, Held):
            return STANDBY, [Deposed(epoch, f"the lease moved on to epoch {result.epoch}")]
        if isinstance(result, Taken):
            return STANDBY, [Deposed(epoch, f"{result.holder or 'nobody'} holds the lease at epoch {result.epoch}")]
    silent = now - state.renewed_at
    if silent >= timing.step_down_after:
        why = f": {result.reason}" if isinstance(result, Failed) else ""
        return STANDBY, [Deposed(epoch, f"no renewal for {silent:.1f} s{why}")]
    return state, []


Attempt = Callable[[int | None], LeaseState]  # blocking: acquire (None) or renew (the epoch) the lease
Release = Callable[[int], object]  # blocking: give the lease up, held at that epoch


def store_attempts(db: Database, holder: str, timing: Timing, name: str = leases.LAUNCHER) -> tuple[Attempt, Release]:
    """``holder``'s attempts at the lease ``name`` in ``db``, and its release, each a transaction of its own."""

    def attempt(epoch: int | None) -> LeaseState:
        with db.session() as s:
            return leases.acquire_or_renew(s, name, holder, timing.lease_seconds, epoch=epoch)

    def release(epoch: int) -> bool:
        with db.session() as s:
            return leases.release(s, name, holder, epoch)

    return attempt, release


class Elector:
    """Runs ``on_tick`` against the store every ``timing.renew_every`` seconds until cancelled."""

    def __init__(self, holder: str, attempt: Attempt, release: Release, on_elected: Callable[[int], Awaitable[None]],
                 on_deposed: Callable[[], Awaitable[None]], *, timing: Timing | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.holder, self.timing, self.state = holder, timing or Timing(), STANDBY
        self._attempt, self._release, self._clock = attempt, release, clock
        self._on_elected, self._on_deposed = on_elected, on_deposed
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pai-lease")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        pending: tuple[asyncio.Future[LeaseState], int | None, float] | None = None
        try:
            while True:
                tick = self._clock()
                if pending is None:
                    asked = self.state.epoch
                    pending = loop.run_in_executor(self._thread, self._attempt, asked), asked, tick
                future, asked, at = pending
                done, _ = await asyncio.wait({future}, timeout=self.timing.renew_every)
                if future in done:
                    pending, error = None, future.exception()
                    result = (Failed(asked, repr(error)) if error is not None
                              else outcome(future.result(), self.holder, asked, at))
                else:
                    result = Failed(asked, f"the database has not answered for {self._clock() - at:.1f} s")
                await self._apply(result)
                await asyncio.sleep(max(0.0, tick + self.timing.renew_every - self._clock()))
        finally:
            await self._stop()

    async def _apply(self, result: Outcome) -> None:
        self.state, actions = on_tick(self.state, result, self._clock(), self.timing)
        for action in actions:
            if isinstance(action, Elected):
                log.info("lease acquired holder=%s epoch=%d", self.holder, action.epoch)
                await self._on_elected(action.epoch)
            else:
                log.warning("stepping down holder=%s epoch=%d reason=%s", self.holder, action.epoch, action.reason)
                await self._on_deposed()

    async def _stop(self) -> None:
        epoch, self.state = self.state.epoch, STANDBY
        self._thread.shutdown(wait=False)
        if epoch is None:
            return
        log.info("stepping down holder=%s epoch=%d reason=stopped", self.holder, epoch)
        await self._on_deposed()
        try:
            await asyncio.wait_for(asyncio.to_thread(self._release, epoch), timeout=self.timing.renew_every)
        except Exception as e:  # the lease runs out by itself
            log.warning("lease not released holder=%s epoch=%d error=%r", self.holder, epoch, e)
