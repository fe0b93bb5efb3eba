"""The production scheduling path (``Launcher.schedule_pass``): incremental passes that look only at what changed,
a full pass when the scheduler's view is stale, and the same decisions as full passes on random workloads."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.node import NodeState
from pai.domain.resources import Resources
from pai.domain.states import JobState
from pai.launcher import cluster
from pai.launcher.service import Launcher, LauncherConfig
from pai.launcher.vcadmin import VcAdmin
from pai.protocol import ContainerReport, ContainerStatus
from pai.protocol.messages import HeartbeatRequest, NodeInfo, RegisterRequest, StartTask, StopTask
from pai.store import jobs
from pai.store.db import Database
from pai.store.records import User
from pai.store.vcs import VcStatus
from pai.vc import Decision
from tests.dbkit import statements_of
from tests.launcher.builders import Clock, Counter, user
from tests.store.conftest import make_database

NODES = {"n1": Resources(4, 16, 64_000), "n2": Resources(4, 16, 64_000), "n3": Resources(8, 32, 128_000)}
VCS = {"virtualClusters": [
    {"name": "default"},
    {"name": "research", "guaranteed": {"gpu": 8, "cpu": 32, "memoryMB": 96_000}},
], "scheduler": {"minRunSeconds": 30}}


@pytest.fixture
def databases(tmp_path: Path) -> Iterator[tuple[Database, Database]]:
    with make_database("sqlite", tmp_path / "a") as a, make_database("sqlite", tmp_path / "b") as b:
        yield a, b


def spec(name: str, gpu: int, instances: int = 1, vc: str = "default", priority: int = 10) -> JobSpec:
    role = TaskRoleSpec("w", instances, "sleep 600", Resources(gpu, 1, 1000))
    return JobSpec(name=name, task_roles=(role,), image="busybox", virtual_cluster=vc, priority=priority)


@dataclass
class Agents:
    """The agents of one launcher's nodes, simulated: they start what they are told and report it."""

    launcher: Launcher
    running: dict[str, dict[str, ContainerReport]] = field(default_factory=dict)  # node -> attempt -> report

    def register(self) -> None:
        for name, total in NODES.items():
            self.launcher.register(RegisterRequest(NodeInfo(name, f"10.0.0.{name[1:]}", total)))
            self.running[name] = {}

    def heartbeat(self, now: float) -> None:
        for name, reports in self.running.items():
            sent = tuple(reports.values())
            reply = self.launcher.heartbeat(HeartbeatRequest(name, sent))
            for r in sent:  # an exit is reported once
                if r.status is ContainerStatus.EXITED:
                    del reports[r.attempt_id]
            for c in reply.commands:
                if isinstance(c, StartTask):
                    reports[c.attempt_id] = ContainerReport(c.attempt_id, c.job_key, c.role, c.index,
                                                            ContainerStatus.RUNNING, started_at=now)
                elif isinstance(c, StopTask) and c.attempt_id in reports:
                    reports[c.attempt_id] = replace(reports[c.attempt_id], status=ContainerStatus.EXITED,
                                                    exit_code=c.exit_code, finished_at=now)

    def tasks(self) -> list[tuple[str, str, int]]:
        """(node, job key, index) of every task that runs."""
        return sorted((n, r.job_key, r.index) for n, rs in self.running.items() for r in rs.values()
                      if r.status is ContainerStatus.RUNNING)

    def exit(self, task: tuple[str, str, int], code: int, now: float) -> None:
        node, key, index = task
        for attempt, r in self.running[node].items():
            if (r.job_key, r.index) == (key, index) and r.status is ContainerStatus.RUNNING:
                self.running[node][attempt] = replace(r, status=ContainerStatus.EXITED, exit_code=code,
                                                      finished_at=now)


def decided(d: Decision) -> tuple[object, ...]:
    return (sorted((a.job, a.placements) for a in d.admissions), sorted((p.victim, p.preemptor) for p in d.preemptions))


def job_states(db: Database) -> dict[str, str]:
    with db.session() as s:
        return {j.key: j.state.value for j in jobs.active_jobs(s)}


def two_masters(databases: tuple[Database, Database], clock: Clock) -> list[tuple[Launcher, Agents]]:
    """The same cluster (VCS, NODES) on two masters, each with its agents registered; the first is to schedule
    incrementally, the second to rebuild from its store every pass."""
    sides = []
    for db in databases:
        with db.session() as s:
            cluster.apply_file(s, VCS, clock())
        launcher = Launcher(db, LauncherConfig(full_pass_seconds=1e9), clock=clock, ids=Counter())
        agents = Agents(launcher)
        agents.register()
        sides.append((launcher, agents))
    return sides


@pytest.mark.parametrize("seed", range(12))
def test_incremental_passes_decide_what_full_passes_decide_on_random_workloads(
        databases: tuple[Database, Database], seed: int) -> None:
    """Two masters see the same random workload (submissions of several sizes, priorities and VCs, tasks that
    exit, jobs stopped, a node cordoned and back): one schedules incrementally, the other rebuilds every pass from
    the store. Every pass admits and preempts the same, and the jobs end up in the same states."""
    rnd = random.Random(seed)
    clock = Clock(1000.0)
    sides = two_masters(databases, clock)
    (inc, inc_agents), (full, full_agents) = sides
    admitted = preempted = 0
    for step in range(25):
        clock.now += rnd.choice([0.5, 5, 60])
        for k in range(rnd.choice([0, 1, 1, 2, 3])):
            job = spec(f"j{step}-{k}", rnd.choice([0, 1, 1, 2, 4]), rnd.choice([1, 1, 2]),
                       rnd.choice(["default", "research"]), rnd.choice([-1, 10, 10, 100]))
            for launcher, _ in sides:
                launcher.submit(user("alice", "research"), job, "{}")
        running = inc_agents.tasks()
        assert running == full_agents.tasks()
        for task in rnd.sample(running, min(len(running), rnd.choice([0, 0, 1, 2]))):
            code = rnd.choice([0, 0, 1])
            for _, agents in sides:
                agents.exit(task, code, clock())
        if running and rnd.random() < 0.15:
            key = rnd.choice(running)[1]
            for launcher, _ in sides:
                launcher.stop(key, User(name="admin", admin=True))
        if rnd.random() < 0.1:
            node = rnd.choice(sorted(NODES))
            state = rnd.choice([NodeState.CORDONED, NodeState.READY])
            for launcher, _ in sides:
                launcher.set_node_state(node, state)
        for _, agents in sides:
            agents.heartbeat(clock())
        a, b = inc.schedule_pass(), full.schedule_pass(full=True)
        assert decided(a) == decided(b), (seed, step)
        admitted, preempted = admitted + len(a.admissions), preempted + len(a.preemptions)
        for _, agents in sides:
            agents.heartbeat(clock())
    assert job_states(inc.db) == job_states(full.db)
    assert inc.scheduling.passes - inc.scheduling.full_passes > 10  # most passes were incremental
    assert admitted > 10, admitted
    print(f"seed {seed}: {admitted} admitted, {preempted} preempted, {inc.scheduling.full_passes} full passes")


def test_a_pass_after_a_submission_reads_the_new_job_not_the_queue(databases: tuple[Database, Database]) -> None:
    db = databases[0]
    launcher = Launcher(db, LauncherConfig(), clock=Clock(1000.0))
    launcher.register(RegisterRequest(NodeInfo("n1", "10.0.0.1", Resources(0, 1, 1000))))
    for i in range(40):  # more than the node can hold: they wait
        launcher.submit(user("alice", "research"), spec(f"queued-{i}", 0), "{}")
    launcher.schedule_pass()
    assert launcher.scheduling.full_passes == 1
    launcher.submit(user("alice", "research"), spec("new", 0), "{}")
    with statements_of(db.engine) as statements:
        decision = launcher.schedule_pass()
    assert launcher.scheduling.full_passes == 1  # incremental
    assert decision.waiting["alice~new"].code == "NoNodeFits"
    job_reads = [q for q in statements if q.lstrip().upper().startswith("SELECT") and "FROM jobs" in q]
    assert all("jobs.state IN" not in q for q in job_reads), job_reads  # no read of every active job
    assert len(job_reads) == 1, job_reads  # the new job, by id


def test_a_node_change_makes_the_next_pass_a_full_one(databases: tuple[Database, Database]) -> None:
    db = databases[0]
    launcher = Launcher(db, LauncherConfig(), clock=Clock(1000.0))
    launcher.register(RegisterRequest(NodeInfo("n1", "10.0.0.1", Resources(0, 1, 1000))))
    launcher.submit(user("alice", "research"), spec("a", 0), "{}")
    launcher.submit(user("alice", "research"), spec("b", 0), "{}")
    assert [a.job for a in launcher.schedule_pass().admissions] == ["alice~a"]
    launcher.schedule_pass()
    assert launcher.scheduling.full_passes == 1
    # a second node joins: only a rebuilt view knows it, and b starts there; the view is rebuilt from the jobs
    # the scheduler follows, not from a read of every active job (that is the periodic pass's)
    launcher.register(RegisterRequest(NodeInfo("n2", "10.0.0.2", Resources(0, 1, 1000))))
    with statements_of(db.engine) as statements:
        admissions = launcher.schedule_pass().admissions
    assert [(a.job, a.placements[0].node) for a in admissions] == [("alice~b", "n2")]
    assert (launcher.scheduling.full_passes, launcher.scheduling.reloads) == (2, 1)
    assert not [q for q in statements if "FROM jobs" in q and "jobs.state IN" in q], statements
    # a heartbeat that changes nothing keeps the view
    launcher.heartbeat(HeartbeatRequest("n2"))
    launcher.schedule_pass()
    assert launcher.scheduling.full_passes == 2
    launcher.set_node_state("n2", NodeState.CORDONED)
    launcher.schedule_pass()
    assert launcher.scheduling.full_passes == 3


def test_a_full_pass_runs_every_full_pass_seconds(databases: tuple[Database, Database]) -> None:
    clock = Clock(1000.0)
    launcher = Launcher(databases[0], LauncherConfig(full_pass_seconds=60), clock=clock)
    launcher.schedule_pass()
    clock.now += 59
    launcher.schedule_pass()
    assert launcher.scheduling.full_passes == 1
    clock.now += 1
    launcher.schedule_pass()
    assert (launcher.scheduling.full_passes, launcher.scheduling.reloads) == (2, 2)  # read from the store


def test_a_vc_change_is_seen_by_the_next_pass(databases: tuple[Database, Database]) -> None:
    db = databases[0]
    launcher = Launcher(db, LauncherConfig(), clock=Clock(1000.0))
    launcher.register(RegisterRequest(NodeInfo("n1", "10.0.0.1", Resources(0, 4, 4000))))
    launcher.schedule_pass()
    launcher.submit(user("alice", "research"), spec("held", 0), "{}")
    # meanwhile an admin stops the VC (VcAdmin does not tell the launcher: every pass compares the configuration)
    VcAdmin(db, launcher.clock, launcher.clusters).set_status("default", VcStatus.STOPPED)
    decision = launcher.schedule_pass()
    assert not decision.admissions and decision.waiting["alice~held"].code == "VcStopped"
    assert launcher.scheduling.full_passes == 2


def test_a_failed_pass_leaves_the_next_one_to_rebuild(databases: tuple[Database, Database],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    db = databases[0]
    launcher = Launcher(db, LauncherConfig(), clock=Clock(1000.0))
    launcher.register(RegisterRequest(NodeInfo("n1", "10.0.0.1", Resources(0, 4, 4000))))
    launcher.schedule_pass()
    launcher.submit(user("alice", "research"), spec("a", 0), "{}")

    def broken(*_: object) -> None:
        raise RuntimeError("the store went away")

    monkeypatch.setattr(jobs, "set_waiting_reasons", broken)
    with pytest.raises(RuntimeError):
        launcher.schedule_pass()  # the scheduler admitted `a` in memory; the store rolled the admission back
    monkeypatch.undo()
    assert [a.job for a in launcher.schedule_pass().admissions] == ["alice~a"]
    assert (launcher.scheduling.full_passes, launcher.scheduling.reloads) == (2, 2)  # read from the store again


def test_a_pass_acts_on_at_most_admissions_per_pass_and_leaves_the_rest_to_the_next(
        databases: tuple[Database, Database]) -> None:
    """The first pass after nodes join a long queue decides many admissions; it acts on a bounded number (a
    short transaction) and the scheduler takes the rest back as waiting, for the next pass to decide again."""
    db = databases[0]
    launcher = Launcher(db, LauncherConfig(admissions_per_pass=2), clock=Clock(1000.0))
    for i in range(5):
        launcher.submit(user("alice", "research"), spec(f"j{i}", 0), "{}")
    launcher.register(RegisterRequest(NodeInfo("n1", "10.0.0.1", Resources(0, 8, 8000))))
    acted: list[list[str]] = []
    while not acted or launcher.scheduling.postponed:
        launcher.schedule_pass()
        with db.session() as s:
            admitted = sorted(j.name for j in jobs.active_jobs(s) if j.state is not JobState.WAITING)
        acted.append(admitted)
    assert acted == [["j0", "j1"], ["j0", "j1", "j2", "j3"], ["j0", "j1", "j2", "j3", "j4"]]
    assert launcher.scheduling.postponed == 0 and not launcher.schedule_pass().admissions  # none admitted twice
    with db.session() as s:
        attempts = [t.attempt_id for j in jobs.active_jobs(s) for t in j.tasks]
    assert len(attempts) == 5 and None not in attempts  # each bound, once
