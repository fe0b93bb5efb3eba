"""Users' open interactive sessions on both backends: counted against a limit, stale ones not counted (a dead API
worker's), two opens at once never both taking the last place, gone with their job.

On SQLite the tests hold the clock (``now``); on PostgreSQL rows carry the server's clock, so staleness is waited for
with a short ``stale_after`` and ``eventually``.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from pai.domain.errors import TooManySessionsError
from pai.store import jobs as store_jobs
from pai.store import sessions, users
from pai.store.db import Database
from pai.store.sessions import OpenSession
from tests.eventually import eventually

from .builders import job

LONG = 60.0


@pytest.fixture
def job_id(db: Database) -> str:
    j = job("j", user="bob")
    with db.session() as s:
        users.create_user(s, "bob", "bob-password")
        users.create_user(s, "carol", "carol-password")
        store_jobs.insert_job(s, j, "{}")
    return j.id


def session(job_id: str, user: str = "bob") -> OpenSession:
    return OpenSession(uuid.uuid4().hex, user, job_id, "exec", "bash")


def open_(db: Database, sess: OpenSession, limit: int = 2, stale_after: float = LONG,
          now: float | None = None) -> None:
    with db.session() as s:
        sessions.open_session(s, sess, limit=limit, stale_after=stale_after, now=now)


def count(db: Database, user: str = "bob", stale_after: float = LONG) -> int:
    with db.session() as s:
        return sessions.live(s, user, stale_after)


def test_a_user_opens_up_to_the_limit_and_a_closed_session_frees_its_place(db: Database, job_id: str) -> None:
    first, second = session(job_id), session(job_id)
    open_(db, first)
    open_(db, second)
    open_(db, session(job_id, "carol"))  # another user's count is their own
    with pytest.raises(TooManySessionsError) as refused:
        open_(db, session(job_id))
    assert refused.value.status == 429 and "max_sessions_per_user 2" in refused.value.message
    assert count(db) == 2  # the refused one left nothing
    with db.session() as s:
        sessions.close_session(s, first.id)
    open_(db, session(job_id))
    assert count(db) == 2


async def test_a_session_not_refreshed_is_not_counted_and_goes_at_the_next_open(db: Database, job_id: str) -> None:
    dead, alive = session(job_id), session(job_id)
    short = 0.3
    if db.dialect == "sqlite":  # the caller's clock
        open_(db, dead, now=1000.0)
        with db.session() as s:
            assert sessions.live(s, "bob", short, now=1000.0 + 1) == 0
        open_(db, alive, limit=1, stale_after=short, now=1000.0 + 1)
    else:  # the server's clock: the dead one is waited for
        open_(db, dead)
        await eventually(lambda: count(db, stale_after=short) == 0, what="the dead session to go stale")
        open_(db, alive, limit=1, stale_after=short)
    with db.session() as s:
        assert not sessions.touch(s, dead.id)  # deleted by the open after it went stale
        assert sessions.touch(s, alive.id)
    assert count(db) == 1


def test_two_opens_at_once_never_both_take_the_last_place(db: Database, job_id: str) -> None:
    # PostgreSQL: API workers open at once; SQLite: the master's one writer thread serialises them (as here)
    threads = 1 if db.dialect == "sqlite" else 6
    barrier = threading.Barrier(threads)

    def one() -> bool:
        barrier.wait()
        try:
            open_(db, session(job_id), limit=1)
        except TooManySessionsError:
            return False
        return True

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(lambda _: one(), range(6)))
    assert sum(results) == 1 and count(db) == 1


def test_sessions_go_with_their_job(db: Database, job_id: str) -> None:
    open_(db, session(job_id))
    with db.session() as s:
        store_jobs.delete_job(s, job_id)
    assert count(db) == 0
