"""The launcher's listener on a real PostgreSQL server: notifications reach the callback once their transaction
commits and never when it rolls back; a listening connection that is killed comes back and says it may have missed
some (``on_reset``). The channel is shared by every test database on the server, so each test names its own
notifications (ids of its own) and ignores the others'."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text

from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.node import NodeState
from pai.domain.resources import Resources
from pai.launcher.listener import Listener, ListenerTiming
from pai.launcher.service import Launcher
from pai.launcher.vcadmin import VcAdmin
from pai.protocol.messages import NodeInfo, RegisterRequest
from pai.store import wakeups
from pai.store.db import Database
from pai.store.wakeups import Wakeup
from tests.eventually import eventually
from tests.launcher.builders import user
from tests.store.conftest import make_database

pytestmark = pytest.mark.postgres
FAST = ListenerTiming(first_retry_seconds=0.05, max_retry_seconds=0.2, check_seconds=0.5, timeout_seconds=2.0)


class Ear:
    """A listener running on the test's event loop, and what it heard."""

    def __init__(self, db: Database, channel: str = wakeups.CHANNEL) -> None:
        self.heard: list[Wakeup] = []
        self.resets = 0
        self.listener = Listener(db.conninfo(), self.heard.append, self._reset, channel=channel, timing=FAST)

    def _reset(self) -> None:
        self.resets += 1


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[Database]:
    with make_database("postgresql", tmp_path) as db:
        yield db


@contextlib.asynccontextmanager
async def _listening(ear: Ear) -> AsyncIterator[Ear]:
    task = asyncio.create_task(ear.listener.run())
    try:
        await asyncio.wait_for(ear.listener.listening.wait(), 10)
        yield ear
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.fixture
async def ear(pg: Database) -> AsyncIterator[Ear]:
    async with _listening(Ear(pg)) as listening:
        yield listening


def _job(id_: str) -> Wakeup:
    return Wakeup(wakeups.JOB, id_)


def _id() -> str:
    return secrets.token_hex(8)


async def test_a_notification_from_another_connection_reaches_the_callback(pg: Database) -> None:
    channel = f"pai_test_{secrets.token_hex(4)}"  # a channel no other test sends on: exactly what is sent arrives
    async with _listening(Ear(pg, channel)) as ear:
        with pg.session() as s:
            for payload in ("job:a1", "not a wake-up", "node:n1", "cluster:"):
                s.execute(select(func.pg_notify(channel, payload)))
        await eventually(lambda: len(ear.heard) == 3)
        assert ear.heard == [_job("a1"), Wakeup(wakeups.NODE, "n1"), Wakeup(wakeups.CLUSTER, "")]
        assert ear.resets == 0


async def test_a_notification_arrives_at_commit_and_never_when_its_transaction_rolls_back(
        pg: Database, ear: Ear) -> None:
    later, gone, first = _id(), _id(), _id()
    with pg.session() as open_one:
        wakeups.job_changed(open_one, later)  # sent in a transaction that commits after the next one
        with pg.session() as s:
            wakeups.job_changed(s, first)
        await eventually(lambda: _job(first) in ear.heard)
        assert _job(later) not in ear.heard
    await eventually(lambda: _job(later) in ear.heard)
    with pytest.raises(RuntimeError), pg.session() as s:
        wakeups.job_changed(s, gone)
        raise RuntimeError("the write fails")
    sentinel = _id()
    with pg.session() as s:
        wakeups.job_changed(s, sentinel)
    await eventually(lambda: _job(sentinel) in ear.heard)  # notifications come in commit order: gone's would be
    assert _job(gone) not in ear.heard  # before it


async def test_a_killed_listening_connection_comes_back_and_calls_on_reset(pg: Database, ear: Ear) -> None:
    killed = ear.listener.backend_pid
    assert killed is not None
    admin = create_engine(pg.url)
    try:
        with admin.connect() as c:
            assert c.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": killed}).scalar() is True
    finally:
        admin.dispose()
    await eventually(lambda: ear.resets == 1 and ear.listener.backend_pid not in (None, killed))
    again = _id()
    with pg.session() as s:
        wakeups.job_changed(s, again)
    await eventually(lambda: _job(again) in ear.heard)


async def test_the_launchers_writes_are_heard(pg: Database, ear: Ear) -> None:
    launcher = Launcher(pg)
    launcher.register(RegisterRequest(NodeInfo("n-heard", "127.0.0.5", Resources(0, 2, 1024))))
    spec = JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "true", Resources(0, 1, 256)),), image="busybox")
    job = launcher.submit(user("alice"), spec, "{}")
    launcher.set_priority(job.key, "test", user("alice"))
    launcher.set_node_state("n-heard", NodeState.CORDONED)
    launcher.stop(job.key, user("alice"))
    VcAdmin(pg, launcher.clock, launcher.clusters, launcher.accounts).put({"name": "v-heard"})
    sentinel = _id()
    with pg.session() as s:
        wakeups.job_changed(s, sentinel)
    await eventually(lambda: _job(sentinel) in ear.heard)
    assert [w for w in ear.heard if w.key in (job.id, "n-heard")] == [
        _job(job.id), _job(job.id), Wakeup(wakeups.NODE, "n-heard"), _job(job.id)]
    after_stop = ear.heard[max(i for i, w in enumerate(ear.heard) if w.key == job.id):]
    assert Wakeup(wakeups.CLUSTER, "") in after_stop  # the VC's, in commit order
