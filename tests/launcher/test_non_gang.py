"""Non-gang jobs (``gangAllocation: false``) in the launcher: partial admission, the snapshot's pending part, the
peers' variables, and the scheduler following such a job."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import pytest

from pai.domain.job import Job
from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.resources import Resources
from pai.domain.states import JobState
from pai.launcher.env import task_env
from pai.launcher.lifecycle import Admitted, Bound, Event, Exited, Note, Preempted, Started, StopRequested, on_event
from pai.launcher.service import Launcher, LauncherConfig
from pai.launcher.snapshot import as_pending, as_running, build_snapshot, unplaced
from pai.launcher.vcadmin import VcAdmin
from pai.protocol.messages import NodeInfo, RegisterRequest
from pai.store import jobs
from pai.store.db import Database
from pai.store.records import User
from pai.store.vcs import VcStatus
from pai.vc import VcQuota
from tests.launcher.builders import Clock, Counter, job, role, user
from tests.launcher.test_scheduling import Agents, databases, decided, job_states, spec, two_masters

__all__ = ["databases"]  # the fixture


def loose(instances: int = 3, min_succeeded: int | None = None) -> Job:
    j = job(role("worker", instances, min_succeeded=min_succeeded))
    return replace(j, spec=replace(j.spec, gang=False))


def bound(*indexes: int, role_name: str = "worker") -> Admitted:
    return Admitted(10.0, tuple(Bound(role_name, i, f"n{i}", f"127.0.0.{i + 2}", {"http": (20000 + i,)}, ())
                                for i in indexes))


def run(j: Job, events: list[Event], ids: Counter) -> Job:
    for ev in events:
        j, _ = on_event(j, ev, ids)
    return j


def started(j: Job, *indexes: int) -> list[Event]:
    return [Started(11.0, j.task("worker", i).attempt_id or "") for i in indexes]


def exited(j: Job, code: int, *indexes: int) -> list[Event]:
    return [Exited(20.0, j.task("worker", i).attempt_id or "", code) for i in indexes]


def states(j: Job) -> list[str]:
    return [t.state.value + ("@" + t.node if t.node else "") for t in j.tasks]


def test_partial_admission_starts_the_placed_tasks_and_runs_the_job() -> None:
    ids = Counter()
    j, cmds = on_event(loose(), bound(0, 1), ids)
    assert j.state is JobState.RUNNING and j.started_at == 10.0
    assert states(j) == ["WAITING@n0", "WAITING@n1", "WAITING"]
    assert j.task("worker", 2).attempt_id is None
    note = next(c for c in cmds if isinstance(c, Note))
    assert note.message == "2 tasks placed on n0, n1 (1 still waiting for a node; gangAllocation: false)"
    # a later pass places the third while the others run
    j = run(j, started(j, 0, 1), ids)
    j, _ = on_event(j, bound(2), ids)
    assert j.state is JobState.RUNNING and j.started_at == 10.0
    assert states(j) == ["RUNNING@n0", "RUNNING@n1", "WAITING@n2"]


def test_a_gang_must_be_bound_whole() -> None:
    j = job(role("worker", 3))
    with pytest.raises(KeyError):
        on_event(j, bound(0, 1), Counter())


def test_a_stale_binding_does_not_move_a_placed_task() -> None:
    ids = Counter()
    j = run(loose(), [bound(0)], ids)
    first = j.task("worker", 0)
    j, _ = on_event(j, bound(0, 1), ids)
    assert j.task("worker", 0) == first and j.task("worker", 1).node == "n1"


CASES = [
    # (name, events after 2 of 3 tasks are placed and run, task states, job state)
    ("the placed tasks succeed: the job runs on, its third task waits",
     lambda j: exited(j, 0, 0, 1), ["SUCCEEDED@n0", "SUCCEEDED@n1", "WAITING"], JobState.RUNNING),
    ("a failure (minFailed 1) fails the job; the unplaced task is dropped",
     lambda j: exited(j, 1, 0), ["FAILED@n0", "STOPPING@n1", "WAITING"], JobState.RUNNING),
    ("stopped: the placed tasks stop, the unplaced one is dropped",
     lambda j: [StopRequested(15.0, "alice")], ["STOPPING@n0", "STOPPING@n1", "WAITING"], JobState.STOPPING),
    ("stopped and gone: STOPPED",
     lambda j: [StopRequested(15.0, "alice"), *exited(j, 143, 0, 1)], ["STOPPED@n0", "STOPPED@n1", "WAITING"],
     JobState.STOPPED),
    ("preempted: requeued as a whole once its placed tasks are gone",
     lambda j: [Preempted(15.0, "bob~big", "reclaim"), *exited(j, 143, 0, 1)], ["WAITING", "WAITING", "WAITING"],
     JobState.WAITING),
]


@pytest.mark.parametrize(("name", "events", "tasks", "state"), CASES, ids=[c[0] for c in CASES])
def test_lifecycle_of_a_partly_placed_job(name: str, events: Callable[[Job], list[Event]], tasks: list[str],
                                          state: JobState) -> None:
    ids = Counter()
    j = run(loose(), [bound(0, 1)], ids)
    j = run(j, started(j, 0, 1), ids)
    j = run(j, events(j), ids)
    assert (states(j), j.state) == (tasks, state)
    assert (unplaced(j) is not None) == (state is JobState.RUNNING and "STOPPING@n1" not in tasks)


def test_the_job_succeeds_once_every_task_did() -> None:
    ids = Counter()
    j = run(loose(), [bound(0, 1)], ids)
    j = run(j, [*started(j, 0, 1), *exited(j, 0, 0, 1), bound(2)], ids)
    j = run(j, [*started(j, 2), *exited(j, 0, 2)], ids)
    assert j.state is JobState.SUCCEEDED


def test_min_succeeded_ends_the_job_with_tasks_unplaced() -> None:
    ids = Counter()
    j = run(loose(min_succeeded=1), [bound(0, 1)], ids)
    j = run(j, [*started(j, 0, 1), *exited(j, 0, 0)], ids)
    assert j.state is JobState.RUNNING  # its other placed task is being stopped
    j = run(j, exited(j, 143, 1), ids)
    assert j.state is JobState.SUCCEEDED and unplaced(j) is None


def test_snapshot_shows_the_unplaced_tasks_as_pending_beside_the_running_part() -> None:
    ids = Counter()
    j = run(loose(), [bound(0, 1)], ids)
    running, pending = as_running(j), unplaced(j)
    assert running is not None and pending is not None
    assert (running.key, pending.key) == (j.key, j.key)
    assert [(t.index, n) for t, n in running.tasks] == [(0, "n0"), (1, "n1")]
    assert [t.index for t in pending.tasks] == [2] and not pending.gang and not running.gang
    snap = build_snapshot(20.0, [], [j], (VcQuota("default"),))
    assert [p.tasks for p in snap.pending] == [pending.tasks]
    assert [r.key for r in snap.running] == [j.key]
    assert unplaced(job(role("worker", 3))) is None  # a waiting job is pending whole
    assert as_pending(loose()).gang is False


def test_env_leaves_out_peers_not_placed_yet() -> None:
    """As OpenPAI's runtime does for a non-gang job: no PAI_HOST_IP and no ports for a peer without a node."""
    ids = Counter()
    j = run(loose(), [bound(0, 2)], ids)
    env = task_env(j, j.task("worker", 0))
    assert env["PAI_TASK_ROLE_worker_HOST_LIST"] == "127.0.0.2:20000,127.0.0.4:20002"
    assert (env["PAI_HOST_IP_worker_0"], env["PAI_HOST_IP_worker_2"]) == ("127.0.0.2", "127.0.0.4")
    assert "PAI_HOST_IP_worker_1" not in env and "PAI_PORT_LIST_worker_1_http" not in env
    assert env["PAI_TASK_ROLE_TASK_COUNT_worker"] == "3"
    # once placed, a task started later sees it
    j = run(j, [bound(1)], ids)
    assert task_env(j, j.task("worker", 1))["PAI_HOST_IP_worker_1"] == "127.0.0.3"


def partly_placed(db: Database) -> tuple[Clock, Launcher, Agents, str]:
    """A master with one node for 2 of the 3 one-GPU tasks of a non-gang job: the 2 placed and running (the agents
    simulated), the third waiting. Returns the clock, the launcher, the agents and the job's key."""
    clock = Clock(1000.0)
    launcher = Launcher(db, LauncherConfig(full_pass_seconds=1e9), clock=clock, ids=Counter())
    launcher.register(RegisterRequest(NodeInfo("n1", "10.0.0.1", Resources(2, 16, 64_000))))
    agents = Agents(launcher, {"n1": {}})
    role3 = TaskRoleSpec("w", 3, "sleep 600", Resources(1, 1, 1000))
    key = launcher.submit(user("alice"), JobSpec(name="ng", task_roles=(role3,), image="busybox", gang=False),
                          "{}").key
    assert [len(a.placements) for a in launcher.schedule_pass().admissions] == [2]
    agents.heartbeat(clock())  # told to start them
    agents.heartbeat(clock())  # reports them running
    return clock, launcher, agents, key


def test_a_master_places_the_rest_as_capacity_frees(databases: tuple[Database, Database]) -> None:
    """The production path (incremental passes fed with changed jobs, agents simulated): 2 of 3 tasks fit, the job
    runs with its third task waiting (and saying why); when one ends, the third runs; the job succeeds."""
    clock, launcher, agents, key = partly_placed(databases[0])
    launcher.schedule_pass()  # incremental: nothing freed, the third task keeps waiting
    with databases[0].session() as s:
        j = jobs.get_job(s, key)
    assert j.state is JobState.RUNNING
    assert sorted(t.state.value for t in j.tasks) == ["RUNNING", "RUNNING", "WAITING"]
    assert j.waiting_reason is not None and j.waiting_reason["code"] == "NoNodeFits"
    assert j.waiting_reason["message"].startswith("1 task waits to be placed")
    agents.exit(agents.tasks()[0], 0, clock())
    agents.heartbeat(clock())
    assert [[p.index for p in a.placements] for a in launcher.schedule_pass().admissions] == [[2]]
    agents.heartbeat(clock())
    agents.heartbeat(clock())
    with databases[0].session() as s:
        j = jobs.get_job(s, key)
    assert sorted(t.state.value for t in j.tasks) == ["RUNNING", "RUNNING", "SUCCEEDED"]
    assert j.waiting_reason is None
    for task in agents.tasks():
        agents.exit(task, 0, clock())
    agents.heartbeat(clock())
    assert job_states(databases[0]) == {}  # no active job left
    with databases[0].session() as s:
        assert jobs.get_job(s, key).state is JobState.SUCCEEDED


def test_a_stopped_vc_keeps_the_waiting_tasks_of_its_running_jobs_unplaced(
        databases: tuple[Database, Database]) -> None:
    """A VC an admin stops admits nothing new: the running part of a partly placed job runs on, its waiting task is
    not placed (not by the full pass the change brings, nor by incremental passes after a task ends) and says why;
    once the VC runs again, it is placed."""
    db = databases[0]
    clock, launcher, agents, key = partly_placed(db)
    admin = VcAdmin(db, launcher.clock, launcher.clusters)
    admin.set_status("default", VcStatus.STOPPED)
    assert not launcher.schedule_pass().admissions  # the full pass the change brings
    agents.exit(agents.tasks()[0], 0, clock())
    agents.heartbeat(clock())
    decision = launcher.schedule_pass()  # incremental: a task ended, capacity is free
    assert not decision.admissions and decision.waiting[key].code == "VcStopped"
    with db.session() as s:
        j = jobs.get_job(s, key)
    assert j.state is JobState.RUNNING
    assert sorted(t.state.value for t in j.tasks) == ["RUNNING", "SUCCEEDED", "WAITING"]
    assert j.waiting_reason is not None and j.waiting_reason["code"] == "VcStopped"
    admin.set_status("default", VcStatus.RUNNING)
    assert [[p.index for p in a.placements] for a in launcher.schedule_pass().admissions] == [[2]]


@pytest.mark.parametrize("seed", [*range(8), 12, 22, 29])
def test_incremental_passes_decide_what_full_passes_decide_with_non_gang_jobs(
        databases: tuple[Database, Database], seed: int) -> None:
    """As tests/launcher/test_scheduling's random workloads, half the jobs non-gang: every pass of a master that
    schedules incrementally decides what one that rebuilds from the store every pass decides."""
    rnd = random.Random(seed)
    clock = Clock(1000.0)
    sides = two_masters(databases, clock)
    (inc, inc_agents), (full, full_agents) = sides
    partial = 0
    for step in range(25):
        clock.now += rnd.choice([0.5, 5, 60])
        for k in range(rnd.choice([0, 1, 1, 2, 3])):
            job = replace(spec(f"j{step}-{k}", rnd.choice([0, 1, 2, 4]), rnd.choice([1, 2, 3, 5]),
                               rnd.choice(["default", "research"]), rnd.choice([-1, 10, 100])), gang=rnd.random() < 0.5)
            for launcher, _ in sides:
                launcher.submit(user("alice", "research"), job, "{}")
        running = inc_agents.tasks()
        assert running == full_agents.tasks()
        for task in rnd.sample(running, min(len(running), rnd.choice([0, 1, 2]))):
            code = rnd.choice([0, 0, 1])
            for _, agents in sides:
                agents.exit(task, code, clock())
        if running and rnd.random() < 0.1:
            key = rnd.choice(running)[1]
            for launcher, _ in sides:
                launcher.stop(key, User(name="admin", admin=True))
        for _, agents in sides:
            agents.heartbeat(clock())
        a, b = inc.schedule_pass(), full.schedule_pass(full=True)
        assert decided(a) == decided(b), (seed, step)
        assert {k: r.code for k, r in a.waiting.items()} == {k: r.code for k, r in b.waiting.items()}, (seed, step)
        partial += sum(1 for x in a.admissions if x.job in a.waiting)
        for _, agents in sides:
            agents.heartbeat(clock())
    assert job_states(inc.db) == job_states(full.db)
    print(f"seed {seed}: {partial} partial admissions")
