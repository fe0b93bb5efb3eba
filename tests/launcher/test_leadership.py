"""Leader election: the core as a table of named cases; the shell against the lease on both backends."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from pai.domain.errors import FencedError
from pai.launcher.leadership import (
    STANDBY,
    Action,
    Deposed,
    Elected,
    Elector,
    Failed,
    Held,
    Leadership,
    Outcome,
    Taken,
    Timing,
    on_tick,
    outcome,
    store_attempts,
)
from pai.store import leases
from pai.store.db import Database
from pai.store.leases import LeaseState
from tests.eventually import eventually
from tests.store.conftest import KINDS, Kind, make_database

KUEUE = Timing()  # 2 s, 15 s, 10 s
LEADING = Leadership(3, 10.0)  # leads at epoch 3, last renewal asked at 10.0

CASES: list[tuple[str, Leadership, Outcome, float, Leadership, list[Action]]] = [
    # (name, state, what the attempt came back with, now, new state, actions)
    ("a standby that acquires leads", STANDBY, Held(None, 1, 5.0), 5.1, Leadership(1, 5.0), [Elected(1)]),
    ("a standby stays one while another holds it", STANDBY, Taken(None, "b", 3), 5.0, STANDBY, []),
    ("a standby stays one while the database fails", STANDBY, Failed(None, "refused"), 5.0, STANDBY, []),
    ("a standby does not lead on a late renewal of its old term", STANDBY, Held(3, 3, 1.0), 5.0, STANDBY, []),
    ("a renewal keeps the lead and restarts the clock", LEADING, Held(3, 3, 12.0), 12.1, Leadership(3, 12.0), []),
    ("a slow renewal that succeeds counts from when it was asked", LEADING, Held(3, 3, 15.0), 24.0,
     Leadership(3, 15.0), []),
    ("an answer asked before the last one does not turn the clock back", Leadership(3, 12.0), Held(3, 3, 11.0), 12.5,
     Leadership(3, 12.0), []),
    ("a failed renewal within 10 s keeps the lead", LEADING, Failed(3, "refused"), 19.9, LEADING, []),
    ("10 s without a renewal steps down", LEADING, Failed(3, "refused"), 20.0, STANDBY,
     [Deposed(3, "no renewal for 10.0 s: refused")]),
    ("another holder at a later epoch deposes at once", LEADING, Taken(3, "b", 4), 11.0, STANDBY,
     [Deposed(3, "b holds the lease at epoch 4")]),
    ("a lease released under the leader deposes it", LEADING, Taken(3, "", 3), 11.0, STANDBY,
     [Deposed(3, "nobody holds the lease at epoch 3")]),
    ("a lease of ours at another epoch deposes", LEADING, Held(3, 5, 11.0), 11.1, STANDBY,
     [Deposed(3, "the lease moved on to epoch 5")]),
    ("an answer of another term is no news within 10 s", LEADING, Taken(None, "b", 2), 12.0, LEADING, []),
    ("an answer of another term is no news after 10 s either", LEADING, Held(None, 3, 9.0), 21.0, STANDBY,
     [Deposed(3, "no renewal for 11.0 s")]),
]


@pytest.mark.parametrize(("name", "state", "result", "now", "new", "actions"), CASES, ids=[c[0] for c in CASES])
def test_on_tick(name: str, state: Leadership, result: Outcome, now: float, new: Leadership,
                 actions: list[Action]) -> None:
    assert on_tick(state, result, now, KUEUE) == (new, actions)


LEASE = LeaseState("launcher", "a", 4, 1.0, 16.0)
OUTCOMES = [
    ("ours", LEASE, "a", Held(4, 4, 2.0)),
    ("another's", LEASE, "b", Taken(4, "a", 4)),
    ("released", LeaseState("launcher", "", 4, 1.0, 2.0), "a", Taken(4, "", 4)),
]


@pytest.mark.parametrize(("name", "lease", "holder", "expected"), OUTCOMES, ids=[c[0] for c in OUTCOMES])
def test_outcome_of_the_stores_answer(name: str, lease: LeaseState, holder: str, expected: Outcome) -> None:
    assert outcome(lease, holder, 4, 2.0) == expected


@pytest.mark.parametrize("figures", [(2.0, 15.0, 15.0), (10.0, 15.0, 10.0), (0.0, 15.0, 10.0), (2.0, 9.0, 10.0)],
                         ids=["steps down as the lease ends", "renews no sooner than it steps down", "never renews",
                              "lease shorter than the step-down"])
def test_timing_that_cannot_keep_one_leader_is_refused(figures: tuple[float, float, float]) -> None:
    renew, lease, step_down = figures
    with pytest.raises(ValueError, match="renew_every < step_down_after < lease_seconds"):
        Timing(renew_every=renew, lease_seconds=lease, step_down_after=step_down)


FAST = Timing(renew_every=0.05, lease_seconds=0.6, step_down_after=0.4)


class Recorder:
    """One master's launcher: what its elector told it, and its lease attempts, which a test can break or stall."""

    def __init__(self, db: Database, holder: str) -> None:
        self.holder = holder
        self.events: list[tuple[str, int | None]] = []
        self.failing = False
        self.answered = 0  # attempts the store answered
        self.answering = threading.Event()
        self.answering.set()
        self.renewing, self.releasing = store_attempts(db, holder, FAST)

    def attempt(self, epoch: int | None) -> LeaseState:
        self.answering.wait()
        if self.failing:
            raise ConnectionError("the database is unreachable")
        lease = self.renewing(epoch)
        self.answered += 1
        return lease

    async def elected(self, epoch: int) -> None:
        self.events.append(("elected", epoch))

    async def deposed(self) -> None:
        self.events.append(("deposed", None))

    def elector(self) -> Elector:
        return Elector(self.holder, self.attempt, self.releasing, self.elected, self.deposed, timing=FAST)


@asynccontextmanager
async def running(*electors: Elector) -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks = [asyncio.create_task(e.run()) for e in electors]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _leading(*electors: Elector) -> Callable[[], list[Elector]]:
    return lambda: [e for e in electors if e.state.epoch is not None]


@pytest.fixture(params=[pytest.param(k, marks=[pytest.mark.postgres] if k == "postgresql" else []) for k in KINDS])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    kind: Kind = request.param
    with make_database(kind, tmp_path) as database:
        yield database


async def test_one_of_two_leads_and_a_stopped_leader_hands_over_at_once(any_db: Database) -> None:
    a, b = Recorder(any_db, "a"), Recorder(any_db, "b")
    first, second = a.elector(), b.elector()
    async with running(first) as (task_a,):
        await eventually(lambda: first.state.epoch == 1, what="a leading")  # before b asks: else b may win the race
        async with running(second):
            await eventually(lambda: b.answered >= 3, what="b asking")
            assert (b.events, second.state, a.events) == ([], STANDBY, [("elected", 1)])
            task_a.cancel()
            await asyncio.gather(task_a, return_exceptions=True)
            assert a.events == [("elected", 1), ("deposed", None)]
            with any_db.session() as s:
                handed = leases.current(s, leases.LAUNCHER)
            assert handed is not None and handed.holder in ("", "b")  # released (or taken already), not run out
            await eventually(lambda: b.events == [("elected", 2)], what="b leading at epoch 2")
            with any_db.session() as s:
                lease = leases.current(s, leases.LAUNCHER)
            assert lease is not None and (lease.holder, lease.epoch) == ("b", 2)
    assert b.events == [("elected", 2), ("deposed", None)]


async def test_a_leader_the_database_fails_steps_down_and_is_fenced(any_db: Database) -> None:
    a, b = Recorder(any_db, "a"), Recorder(any_db, "b")
    first, second = a.elector(), b.elector()
    async with running(first):
        await eventually(lambda: first.state.epoch == 1, what="a leading")
        a.failing = True
        async with running(second):
            await eventually(lambda: a.events == [("elected", 1), ("deposed", None)], what="a stepping down")
            await eventually(lambda: b.events == [("elected", 2)], what="b taking over once a's lease ran out")
            assert _leading(first, second)() == [second]
            with pytest.raises(FencedError), any_db.session() as s:
                leases.fenced(s, leases.LAUNCHER, 1)  # what a's launcher would write now
            a.failing, answered = False, a.answered  # a's database comes back: b keeps the lead, a stands by
            await eventually(lambda: a.answered >= answered + 3, what="a asking again")
            assert (a.events, first.state, second.state.epoch) == ([("elected", 1), ("deposed", None)], STANDBY, 2)


async def test_a_leader_whose_database_does_not_answer_steps_down(any_db: Database) -> None:
    a = Recorder(any_db, "a")
    first = a.elector()
    try:
        async with running(first):
            await eventually(lambda: first.state.epoch == 1, what="a leading")
            a.answering.clear()  # the next attempt hangs
            await eventually(lambda: a.events == [("elected", 1), ("deposed", None)], what="a stepping down")
            a.answering.set()  # its answer, late, is of the old term: a acquires anew, at the next epoch
            await eventually(lambda: a.events[2:] == [("elected", 2)], what="a leading again in a new term")
    finally:
        a.answering.set()
