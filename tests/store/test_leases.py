"""The leader lease on both backends: epochs that only grow, one holder at a time, and writes fenced by the epoch.

On SQLite the tests hold the clock (``now``); on PostgreSQL the lease runs on the server's clock, so expiry is waited
for with short leases and ``eventually``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import TextClause, text

from pai.domain.errors import FencedError
from pai.store import leases
from pai.store.db import Database
from pai.store.leases import LeaseState
from tests.eventually import eventually

from .conftest import Kind, make_database

NAME = leases.LAUNCHER
LONG = 60.0  # a lease that does not run out during a test
SHORT = 0.2  # a lease that does, soon (PostgreSQL's clock)


def ask(db: Database, holder: str, duration: float = LONG, *, epoch: int | None = None,
        now: float | None = None) -> LeaseState:
    with db.session() as s:
        return leases.acquire_or_renew(s, NAME, holder, duration, epoch=epoch, now=now)


def fence(db: Database, epoch: int) -> None:
    with db.session() as s:
        leases.fenced(s, NAME, epoch)


async def expired_for(db: Database, holder: str) -> LeaseState:
    """``holder`` takes the lease once the holder's (SHORT) lease has run out; on SQLite, at once with the clock."""
    if db.dialect == "sqlite":
        return ask(db, holder, now=10_000.0)

    def attempt() -> LeaseState | None:
        state = ask(db, holder)
        return state if state.held_by(holder) else None

    return await eventually(attempt, what=f"{holder} taking over the lease")


def test_first_acquire_gets_epoch_one(db: Database) -> None:
    state = ask(db, "a", now=100.0)
    assert state.held_by("a") and state.epoch == 1
    with db.session() as s:
        assert leases.current(s, NAME) == state
        assert leases.current(s, "another lease") is None


def test_renewal_by_the_holder_keeps_the_epoch_and_extends(db: Database) -> None:
    first = ask(db, "a", 15.0, now=100.0)
    renewed = ask(db, "a", 15.0, epoch=first.epoch, now=102.0)
    assert renewed.held_by("a") and renewed.epoch == first.epoch
    assert renewed.expires_at > first.expires_at and renewed.renewed_at > first.renewed_at
    if db.dialect == "sqlite":
        assert (renewed.renewed_at, renewed.expires_at) == (102.0, 117.0)


def test_another_holder_cannot_take_an_unexpired_lease(db: Database) -> None:
    held = ask(db, "a", 15.0, now=100.0)
    for holder, epoch in (("b", None), ("b", held.epoch)):  # neither by acquiring nor by "renewing" a's epoch
        state = ask(db, holder, 15.0, epoch=epoch, now=114.9)
        assert not state.held_by(holder)
        assert state == held


async def test_after_expiry_another_takes_it_at_the_next_epoch(db: Database) -> None:
    held = ask(db, "a", SHORT, now=100.0)
    taken = await expired_for(db, "b")
    assert taken.held_by("b") and taken.epoch == held.epoch + 1
    # The deposed holder's renewal fails and says who holds it now.
    assert ask(db, "a", epoch=held.epoch, now=10_001.0) == taken


def test_a_holder_acquiring_again_starts_a_new_term(db: Database) -> None:
    """A leader that stepped down and acquires again gets a new epoch, so that its old term's writes are fenced."""
    held = ask(db, "a", now=100.0)
    again = ask(db, "a", now=101.0)
    assert again.held_by("a") and again.epoch == held.epoch + 1
    with pytest.raises(FencedError):
        fence(db, held.epoch)


async def test_a_deposed_holders_fenced_write_raises(db: Database) -> None:
    held = ask(db, "a", SHORT, now=100.0)
    fence(db, held.epoch)  # the holder's writes pass
    taken = await expired_for(db, "b")
    with pytest.raises(FencedError) as raised:
        fence(db, held.epoch)
    assert (raised.value.epoch, raised.value.current, raised.value.holder) == (held.epoch, taken.epoch, "b")
    assert raised.value.code == "FencedError" and "epoch 1 is fenced off" in raised.value.message
    fence(db, taken.epoch)


def test_a_fenced_write_changes_nothing(db: Database) -> None:
    ask(db, "a", now=100.0)
    with pytest.raises(FencedError), db.session() as s:
        s.execute(text("INSERT INTO cluster_settings (key, value) VALUES ('k', '1')"))
        leases.fenced(s, NAME, 7)
    with db.session() as s:
        assert s.execute(text("SELECT count(*) FROM cluster_settings")).scalar() == 0


def test_no_lease_fences_everything(db: Database) -> None:
    with pytest.raises(FencedError, match="no such lease"):
        fence(db, 1)


def test_release_lets_another_take_over_at_once(db: Database) -> None:
    held = ask(db, "a", now=100.0)
    with db.session() as s:
        assert not leases.release(s, NAME, "b", held.epoch, now=101.0)  # not b's
        assert not leases.release(s, NAME, "a", held.epoch + 1, now=101.0)  # not at that epoch
        assert leases.release(s, NAME, "a", held.epoch, now=101.0)
        assert not leases.release(s, NAME, "a", held.epoch, now=101.0)  # once
    with pytest.raises(FencedError, match="held by nobody"):
        fence(db, held.epoch)
    assert not ask(db, "a", epoch=held.epoch, now=101.5).held_by("a")  # released is released: no renewal
    taken = ask(db, "b", now=102.0)
    assert taken.held_by("b") and taken.epoch == held.epoch + 1


def test_concurrent_acquirers_never_share_an_epoch(kind: Kind, tmp_path: Path) -> None:
    """Every acquirer asks again and again for a lease that runs out at once: each success is a takeover. No epoch is
    believed held by two, and the epochs believed held are exactly 1..the final epoch (no takeover lost)."""
    threads, rounds = 4, 40
    with make_database(kind, tmp_path) as db:
        start = threading.Barrier(threads)

        def contend(holder: str) -> list[int]:
            start.wait()
            return [state.epoch for state in (ask(db, holder, 0.0) for _ in range(rounds)) if state.held_by(holder)]

        with ThreadPoolExecutor(threads) as pool:
            won = dict(zip(range(threads), pool.map(contend, [f"m{i}" for i in range(threads)]), strict=True))
        believers: dict[int, list[int]] = defaultdict(list)
        for holder, epochs in won.items():
            for epoch in epochs:
                believers[epoch].append(holder)
        with db.session() as s:
            final = leases.current(s, NAME)
        assert final is not None
        assert {epoch: holders for epoch, holders in believers.items() if len(holders) > 1} == {}
        assert sorted(believers) == list(range(1, final.epoch + 1))
        assert len({h for h, epochs in won.items() if epochs}) > 1  # they did contend


@pytest.mark.postgres
async def test_a_fenced_transaction_holds_off_a_takeover_on_postgresql(tmp_path: Path) -> None:
    """While a leader's fenced write is open, a takeover waits for it (row lock), then bumps the epoch."""
    waiting = text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO leases%'")
    with make_database("postgresql", tmp_path) as db, ThreadPoolExecutor(1) as other:
        held = ask(db, "a", 0.0)  # runs out at once
        with db.session() as s:
            leases.fenced(s, NAME, held.epoch)
            takeover = other.submit(ask, db, "b")
            await eventually(lambda: _scalar(db, waiting), what="the takeover waiting on the row")
            assert not takeover.done()
            s.execute(text("INSERT INTO cluster_settings (key, value) VALUES ('written', '1')"))
        assert takeover.result(timeout=10).epoch == held.epoch + 1


def test_a_fenced_transaction_holds_the_write_lock_on_sqlite(tmp_path: Path) -> None:
    with make_database("sqlite", tmp_path) as db:
        held = ask(db, "a", now=100.0)
        with db.session() as s:
            leases.fenced(s, NAME, held.epoch)
            other = sqlite3.connect(str(tmp_path / "pai-test.db"), timeout=0)
            try:
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    other.execute("UPDATE leases SET holder = 'b', epoch = epoch + 1")
            finally:
                other.close()


def _scalar(db: Database, query: TextClause) -> object:
    """In a transaction of its own: PostgreSQL reads pg_stat_activity once per transaction."""
    with db.engine.connect() as connection:
        return connection.execute(query).scalar()


async def test_a_stale_lease_is_taken_only_by_one_that_says_its_holder_is_gone(db: Database) -> None:
    held = ask(db, "a", LONG, now=100.0)  # renewed at 100, runs out much later

    def b(stale_after: float | None) -> LeaseState:
        with db.session() as s:
            return leases.acquire_or_renew(s, NAME, "b", LONG, stale_after=stale_after, now=104.5)

    assert b(None) == held  # not run out: still a's unless the asker knows a's session has ended
    assert b(LONG) == held  # renewed too recently to be stale
    taken = await eventually(lambda: (t := b(SHORT)).held_by("b") and t, what="b taking the stale lease")
    assert taken.epoch == held.epoch + 1
    with db.session() as s:  # a is deposed: its renewal fails
        assert leases.acquire_or_renew(s, NAME, "a", LONG, epoch=held.epoch, now=105.0).held_by("b")
