"""What the capacity is used by: every VC's usage sampled over time (from the jobs the scheduler follows) and pruned
after a few days; the tasks on each node; the loop that takes a sample every interval."""

from __future__ import annotations

import asyncio

import pytest

from pai.domain.errors import NoVirtualClusterError
from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.resources import Resources
from pai.domain.states import TaskState
from pai.launcher import cluster
from pai.launcher.loop import LauncherLoop
from pai.launcher.service import Launcher, LauncherConfig
from pai.launcher.storethread import StoreThread
from pai.launcher.usage import KEEP_SECONDS
from pai.protocol.messages import NodeInfo, RegisterRequest
from pai.store import stats
from pai.store.db import Database
from tests.eventually import eventually
from tests.launcher.builders import Clock, user

TEAM = {"name": "team", "guaranteed": {"gpu": 1, "cpu": 2, "memoryMB": 2048}, "max": {"gpu": 2}}


def gpu_job(name: str, gpus: int, vc: str = "default") -> JobSpec:
    return JobSpec(name=name, task_roles=(TaskRoleSpec("w", 1, "sleep 600", Resources(gpus, 1, 512)),),
                   image="busybox", virtual_cluster=vc)


@pytest.fixture
def launcher(db: Database) -> Launcher:
    """A master with one 4-GPU node and VCs default and team."""
    with db.session() as s:
        cluster.apply_file(s, {"virtualClusters": [{"name": "default"}, TEAM]}, 0.0)
    launcher = Launcher(db, clock=Clock(10_000.0))
    launcher.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(4, 8, 8192))))
    return launcher


def test_a_sample_holds_each_vcs_usage_guarantee_max_and_jobs(launcher: Launcher) -> None:
    launcher.submit(user("alice", "team"), gpu_job("a", 2), "{}")
    launcher.submit(user("alice", "team"), gpu_job("b", 1, "team"), "{}")
    launcher.submit(user("alice", "team"), gpu_job("c", 4), "{}")  # does not fit: waits
    launcher.schedule_pass()
    by_vc = {x.vc: x for x in launcher.usage.sample()}
    default, team = by_vc["default"], by_vc["team"]
    assert (default.used, default.running_jobs, default.waiting_jobs) == (Resources(2, 1, 512), 1, 1)
    assert (team.used, team.running_jobs, team.waiting_jobs) == (Resources(1, 1, 512), 1, 0)
    assert team.guaranteed == Resources(1, 2, 2048) and team.max == Resources(2, 8, 8192)
    assert default.guaranteed == Resources(3, 6, 6144)  # the rest of the cluster
    assert launcher.usage.history("team", 1) == [team]


def test_history_is_of_the_hours_asked_for_and_old_samples_are_pruned(launcher: Launcher) -> None:
    clock = launcher.clock
    assert isinstance(clock, Clock)
    first = launcher.usage.sample()
    clock.now += 7200.0
    second = launcher.usage.sample()
    assert [x.at for x in launcher.usage.history("default", 1)] == [clock.now]
    assert [x.at for x in launcher.usage.history("default", 3)] == [first[0].at, second[0].at]
    clock.now += KEEP_SECONDS - 3600.0  # the first is now older than what is kept
    launcher.usage.sample()
    with launcher.db.session() as s:
        assert [x.at for x in stats.samples_of(s, "default", 0.0)] == [second[0].at, clock.now]
    with pytest.raises(NoVirtualClusterError):
        launcher.usage.history("nope", 1)


def test_node_reports_name_the_tasks_and_gpus_held_on_each_node(launcher: Launcher) -> None:
    launcher.submit(user("alice"), gpu_job("a", 3), "{}")
    launcher.schedule_pass()
    (report,) = launcher.node_reports()
    (task,) = report.tasks
    assert (task.job, task.role, task.index, task.state) == ("alice~a", "w", 0, TaskState.WAITING)
    assert report.used == Resources(3, 1, 512) and report.used_gpus == sorted(task.gpus) and len(task.gpus) == 3


async def test_the_loop_samples_every_interval(db: Database) -> None:
    launcher = Launcher(db, LauncherConfig(usage_sample_seconds=0.05))
    store = StoreThread()
    loop = LauncherLoop(launcher, store, tick_seconds=0.02)
    task = asyncio.create_task(loop.run())
    try:
        def samples() -> int:
            with db.session() as s:
                return len(stats.samples_of(s, "default", 0.0))

        await eventually(lambda: samples() >= 3, what="three samples")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        store.close()
