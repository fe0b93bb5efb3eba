"""The leading launcher hears writes made through another process (``Launcher.heard``; on PostgreSQL the notifications
of ``pai.store.wakeups``): two launchers on one database, each with its own engine; ``a`` leads and runs the passes,
``b`` takes the users' requests, as a standby master (or an API worker) does. What is heard is applied by the next
pass, on the writer thread, however late in a running pass it was heard."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.node import NodeState
from pai.domain.resources import Resources
from pai.launcher.service import Launcher
from pai.protocol import ContainerReport, ContainerStatus
from pai.protocol.messages import HeartbeatRequest, NodeInfo, RegisterRequest, StartTask, StopTask
from pai.store import jobs, wakeups
from pai.store.db import Database
from pai.store.wakeups import Wakeup
from tests.launcher.builders import user
from tests.store.conftest import KINDS, TEST_KEYRING, Kind, make_database

SPEC = JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "sleep 600", Resources(0, 1, 256)),), image="busybox")
ALICE = user("alice")


def _pair(kind: Kind, tmp_path: Path) -> Iterator[tuple[Launcher, Launcher]]:
    with make_database(kind, tmp_path) as db:
        other = Database(db.url.render_as_string(hide_password=False), TEST_KEYRING)
        try:
            leader, standby = Launcher(db), Launcher(other)
            leader.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(0, 2, 1024))))
            leader.schedule_pass()  # the first pass: a full one, from the store
            yield leader, standby
        finally:
            other.dispose()


@pytest.fixture(params=[pytest.param(k, marks=[pytest.mark.postgres] if k == "postgresql" else []) for k in KINDS])
def two(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Launcher, Launcher]]:
    yield from _pair(request.param, tmp_path)


@pytest.fixture
def two_on_postgresql(tmp_path: Path) -> Iterator[tuple[Launcher, Launcher]]:
    yield from _pair("postgresql", tmp_path)


def _state(launcher: Launcher, key: str) -> str:
    with launcher.db.session() as s:
        return jobs.get_job(s, key).state.value


def test_a_job_submitted_elsewhere_waits_for_the_full_pass_unless_heard_then_the_next_pass_admits_it(
        two: tuple[Launcher, Launcher]) -> None:
    leader, standby = two
    job = standby.submit(ALICE, SPEC, "{}")
    leader.schedule_pass()
    assert _state(leader, job.key) == "WAITING"  # an incremental pass looks only at what it was told of
    leader.heard(Wakeup(wakeups.JOB, job.id))
    assert _state(leader, job.key) == "WAITING"  # queued: nothing acts before the pass
    leader.schedule_pass()
    assert _state(leader, job.key) == "RUNNING"


def test_a_job_stopped_elsewhere_reaches_its_agent_at_once(two: tuple[Launcher, Launcher]) -> None:
    leader, standby = two
    job = leader.submit(ALICE, SPEC, "{}")
    leader.schedule_pass()
    (start,) = leader.heartbeat(HeartbeatRequest("n1")).commands
    assert isinstance(start, StartTask)
    running = (ContainerReport(start.attempt_id, job.key, "w", 0, ContainerStatus.RUNNING, started_at=1.0),)
    leader.heartbeat(HeartbeatRequest("n1", running))
    assert leader.heartbeat(HeartbeatRequest("n1", running)).commands == ()  # quiet: answered from memory
    leader.take_touched()

    standby.stop(job.key, ALICE)
    leader.heard(Wakeup(wakeups.JOB, job.id))
    leader.schedule_pass()
    assert leader.take_touched() == {"n1"}  # its agent is poked after the pass
    (stop,) = leader.heartbeat(HeartbeatRequest("n1", running)).commands  # no longer quiet: the stop goes out
    assert isinstance(stop, StopTask) and stop.attempt_id == start.attempt_id


def test_a_node_cordoned_elsewhere_makes_the_next_pass_a_full_one(two: tuple[Launcher, Launcher]) -> None:
    leader, standby = two
    standby.set_node_state("n1", NodeState.CORDONED)
    full = leader.scheduling.full_passes
    leader.schedule_pass()
    assert leader.scheduling.full_passes == full  # not told: the leader's view is the old one
    leader.heard(Wakeup(wakeups.NODE, "n1"))
    job = standby.submit(ALICE, SPEC, "{}")
    leader.heard(Wakeup(wakeups.JOB, job.id))
    leader.schedule_pass()
    assert leader.scheduling.full_passes == full + 1
    assert _state(leader, job.key) == "WAITING"  # the only node is cordoned


def test_a_reset_reloads_everything(two: tuple[Launcher, Launcher]) -> None:
    leader, standby = two
    job = standby.submit(ALICE, SPEC, "{}")  # its notification was missed
    reloads = leader.scheduling.reloads
    leader.heard(None)
    leader.schedule_pass()
    assert leader.scheduling.reloads == reloads + 1
    assert _state(leader, job.key) == "RUNNING"


def test_what_is_heard_from_another_thread_during_a_pass_is_applied_by_the_next_one(
        two_on_postgresql: tuple[Launcher, Launcher], monkeypatch: pytest.MonkeyPatch) -> None:
    """A full pass reads the active jobs, then rebuilds the scheduler's view (which forgets the jobs marked changed).
    A job submitted through another master after that read, and heard meanwhile on the event loop's thread, must
    not be forgotten with them: the inbox keeps it for the next pass. (PostgreSQL only: on SQLite one process
    writes, and the other launcher's commit would fail the pass's own write.)"""
    leader, standby = two_on_postgresql
    real = jobs.active_jobs
    submitted: list[str] = []

    def read_then_another_master_submits(s):  # type: ignore[no-untyped-def]
        found = real(s)
        job = standby.submit(ALICE, SPEC, "{}")
        submitted.append(job.key)
        hearing = threading.Thread(target=leader.heard, args=(Wakeup(wakeups.JOB, job.id),))
        hearing.start()
        hearing.join()
        return found

    monkeypatch.setattr(jobs, "active_jobs", read_then_another_master_submits)
    leader.schedule_pass(full=True)
    monkeypatch.setattr(jobs, "active_jobs", real)
    assert _state(leader, submitted[0]) == "WAITING"
    leader.schedule_pass()  # incremental: only what it was told of
    assert _state(leader, submitted[0]) == "RUNNING"
