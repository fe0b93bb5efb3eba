"""What a heartbeat that needs the store costs: the jobs it changes, starts a task of or tells the members of are
loaded whole (decoded); the others on its node are read as the rows of their tasks there. Counted through the
master's ``pai_heartbeat_jobs_loaded_total``, not timed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pai.domain.jobspec import ElasticRange, JobSpec, TaskRoleSpec
from pai.domain.resources import Resources
from pai.domain.states import JobState
from pai.launcher.service import Launcher, LauncherConfig
from pai.protocol import ContainerReport, ContainerStatus
from pai.protocol.messages import HeartbeatRequest, MasterReply, NodeInfo, RegisterRequest, StartTask
from pai.store import jobs
from pai.store.db import Database
from tests.launcher.builders import Clock, user
from tests.store.conftest import make_database

JOBS = 10


@dataclass
class Node:
    """n1 with JOBS one-task jobs running on it (job key -> attempt), its master having seen them all."""

    db: Database
    launcher: Launcher
    running: dict[str, str] = field(default_factory=dict)  # attempt -> job key

    def beat(self, *extra: ContainerReport) -> MasterReply:
        reports = tuple(ContainerReport(a, k, "w", 0, ContainerStatus.RUNNING, started_at=1000.0)
                        for a, k in self.running.items()) + extra
        reply = self.launcher.heartbeat(HeartbeatRequest("n1", reports))
        for c in reply.commands:
            if isinstance(c, StartTask):
                self.running[c.attempt_id] = c.job_key
        return reply

    def loaded(self) -> float:
        value = self.launcher.metrics.registry.get_sample_value("pai_heartbeat_jobs_loaded_total")
        assert value is not None
        return value

    def loaded_by(self, *extra: ContainerReport) -> tuple[float, MasterReply]:
        """The jobs one heartbeat that needs the store loads whole, and its reply (every node's quiet view
        forgotten first, as a full pass does)."""
        self.launcher.heartbeats.forget_all()
        before = self.loaded()
        reply = self.beat(*extra)
        return self.loaded() - before, reply


def one_task(name: str, elastic: bool = False) -> JobSpec:
    role = TaskRoleSpec("w", 1, "sleep 600", Resources(0, 1, 64),
                        elastic=ElasticRange(1, 2) if elastic else None)
    return JobSpec(name=name, task_roles=(role,), image="busybox")


def start(db: Database, *, elastic: int = 0) -> Node:
    launcher = Launcher(db, LauncherConfig(node_timeout_seconds=1e9), clock=Clock(1000.0))
    launcher.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(0, JOBS, 64 * JOBS))))
    for i in range(JOBS):
        launcher.submit(user("alice"), one_task(f"j{i}", elastic=i < elastic), "{}")
    launcher.schedule_pass()
    node = Node(db, launcher)
    node.beat()
    node.beat()  # every task RUNNING on the master
    assert len(node.running) == JOBS
    return node


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with make_database("sqlite", tmp_path) as d:
        yield d


def test_a_heartbeat_that_changes_nothing_loads_no_job(db: Database) -> None:
    node = start(db)
    loaded, reply = node.loaded_by()
    assert (loaded, reply.commands) == (0, ())


def test_an_exit_loads_its_job_and_the_start_of_the_next_attempt_only_that(db: Database) -> None:
    node = start(db)
    attempt, key = next(iter(node.running.items()))
    del node.running[attempt]
    failed = ContainerReport(attempt, key, "w", 0, ContainerStatus.EXITED, 0, finished_at=1001.0)
    assert node.loaded_by(failed)[0] == 1
    with db.session() as s:
        assert jobs.get_job(s, key).state is JobState.SUCCEEDED
        assert [j.state for j in jobs.active_jobs_on(s, ["n1"])] == [JobState.RUNNING] * (JOBS - 1)
    node.launcher.submit(user("alice"), one_task("next"), "{}")
    node.launcher.schedule_pass()
    loaded, reply = node.loaded_by()
    assert loaded == 1
    assert [c.job_key for c in reply.commands if isinstance(c, StartTask)] == ["alice~next"]


def test_elastic_jobs_are_loaded_for_their_members(db: Database) -> None:
    node = start(db, elastic=2)
    loaded, reply = node.loaded_by()
    assert loaded == 2
    assert sorted(m.job_key for m in reply.members) == ["alice~j0", "alice~j1"]


def test_a_master_that_has_not_seen_the_jobs_loads_them_once(db: Database) -> None:
    """Whether a job is elastic is learnt from it whole: a new master (a failover) loads every job on the node at
    its first heartbeat through the store, then only what changes."""
    node = start(db)
    node.launcher = Launcher(db, LauncherConfig(node_timeout_seconds=1e9), clock=Clock(1000.0))
    assert node.loaded_by()[0] == JOBS
    assert node.loaded_by()[0] == 0
