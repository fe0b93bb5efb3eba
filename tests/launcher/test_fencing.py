"""A launcher that leads at an epoch with fencing (``Launcher.lead(epoch, fence=True)``): once another master holds
the lease, its scheduling pass, its agents' messages and its node timeout fail with FencedError and write nothing;
the loop then steps down (``Role.fenced``) and answers the agents NotLeaderError; a standby's loop runs no pass."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai.domain.errors import FencedError, NotLeaderError
from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.resources import Resources
from pai.launcher.loop import LauncherLoop
from pai.launcher.role import Role
from pai.launcher.service import Launcher
from pai.launcher.storethread import StoreThread
from pai.protocol.messages import HeartbeatRequest, NodeInfo, RegisterRequest
from pai.store import jobs, leases
from pai.store.db import Database
from tests.eventually import eventually
from tests.launcher.builders import user
from tests.store.conftest import KINDS, Kind, make_database

ME, OTHER = "http://m1:9186#1", "http://m2:9186#2"
SPEC = JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "true", Resources(0, 1, 256)),), image="busybox")
NODE = NodeInfo("n1", "127.0.0.5", Resources(0, 4, 4096))


@pytest.fixture(params=[pytest.param(k, marks=[pytest.mark.postgres] if k == "postgresql" else []) for k in KINDS])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    kind: Kind = request.param
    with make_database(kind, tmp_path) as database:
        yield database


def _take(db: Database, holder: str) -> int:
    with db.session() as s:
        if (lease := leases.current(s, leases.LAUNCHER)) is not None:
            leases.release(s, leases.LAUNCHER, lease.holder, lease.epoch)
        return leases.acquire_or_renew(s, leases.LAUNCHER, holder, 15.0).epoch


def _state(db: Database, key: str) -> str:
    with db.session() as s:
        return jobs.get_job(s, key).state.value


def test_a_deposed_leaders_pass_heartbeats_and_node_timeout_are_fenced_and_write_nothing(any_db: Database) -> None:
    launcher = Launcher(any_db)
    launcher.lead(_take(any_db, ME), fence=True)
    launcher.register(RegisterRequest(NODE))
    _take(any_db, OTHER)  # another master leads now
    job = launcher.submit(user(), SPEC, "{}")  # users' requests are not the launcher's: stored
    with pytest.raises(FencedError):
        launcher.schedule_pass()
    assert _state(any_db, job.key) == "WAITING"
    with pytest.raises(FencedError):
        launcher.register(RegisterRequest(NODE))
    with pytest.raises(FencedError):
        launcher.heartbeat(HeartbeatRequest("n1"))  # its first: it needs the store
    with pytest.raises(FencedError):
        launcher.check_nodes()


def test_unfenced_the_same_launcher_writes_as_before(any_db: Database) -> None:
    launcher = Launcher(any_db)
    launcher.lead(_take(any_db, ME))  # fence=False: SQLite's master, the only one
    launcher.register(RegisterRequest(NODE))
    _take(any_db, OTHER)
    job = launcher.submit(user(), SPEC, "{}")
    launcher.schedule_pass()
    assert _state(any_db, job.key) == "RUNNING"


async def test_a_fenced_pass_steps_the_loop_down_and_a_standby_runs_no_pass(any_db: Database) -> None:
    launcher, store = Launcher(any_db), StoreThread()
    role = Role(ME)
    stepped_down: list[bool] = []

    async def deposed() -> None:
        stepped_down.append(True)

    role.on_deposed = deposed
    loop = LauncherLoop(launcher, store, tick_seconds=0.05, role=role)
    launcher.lead(_take(any_db, ME), fence=True)
    role.lead(launcher.epoch)
    await loop.register(RegisterRequest(NODE))
    task = asyncio.create_task(loop.run())
    try:
        await eventually(lambda: loop.passes > 0)
        role.saw(leases.LeaseState(leases.LAUNCHER, OTHER, 99, 0.0, 0.0))
        _take(any_db, OTHER)
        job = launcher.submit(user(), SPEC, "{}")
        loop.wake()
        await eventually(lambda: stepped_down == [True] and not role.leading)
        passes = loop.passes
        with pytest.raises(NotLeaderError) as refused:
            await loop.heartbeat(HeartbeatRequest("n1"))
        assert refused.value.leader == "http://m2:9186"
        loop.wake()
        await asyncio.sleep(0.3)  # six ticks of a standby
        assert (loop.passes, _state(any_db, job.key)) == (passes, "WAITING")
    finally:
        task.cancel()
        store.close()
