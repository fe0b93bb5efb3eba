"""Quiet heartbeats: one that reports what the master expects on its node is answered from memory, with no SQL;
anything else about the node or its tasks sends the next heartbeat through the store, which reconciles it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from pai.domain.errors import NoNodeError
from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.node import NodeState
from pai.domain.resources import Resources
from pai.domain.states import TaskState
from pai.launcher.heartbeats import Quiet, quiet_attempts
from pai.launcher.service import Launcher, LauncherConfig
from pai.protocol import ContainerReport, ContainerStatus
from pai.protocol.exitcodes import PlatformExit
from pai.protocol.messages import GpuHealth, HeartbeatRequest, MasterReply, StartTask, StopTask
from pai.store import history, jobs, nodes
from pai.store.db import Database
from pai.store.records import TaskAttempt, User
from tests.launcher.builders import Clock, user
from tests.launcher.test_service import register
from tests.store.conftest import make_database


class Statements:
    """Counts the SQL statements the database runs."""

    def __init__(self, db: Database) -> None:
        self.n = 0
        event.listen(db.engine, "before_cursor_execute", self._count)

    def _count(self, *_: Any) -> None:
        self.n += 1

    def during(self, fn: Callable[[], Any]) -> int:
        before = self.n
        fn()
        return self.n - before


@dataclass
class Steady:
    """Node n1 running one task of job alice~j (attempt ``attempt``), its last heartbeat handled by the store and
    found to need nothing."""

    db: Database
    launcher: Launcher
    clock: Clock
    attempt: str
    sql: Statements

    def beat(self, *reports: ContainerReport, gpus: tuple[GpuHealth, ...] = (),
             problems: tuple[str, ...] = ()) -> MasterReply:
        return self.launcher.heartbeat(HeartbeatRequest("n1", reports, gpus=gpus, problems=problems))

    def running(self, attempt: str | None = None) -> ContainerReport:
        return ContainerReport(attempt or self.attempt, "alice~j", "w", 0, ContainerStatus.RUNNING, started_at=1000.0)

    def task_state(self, key: str = "alice~j") -> str:
        with self.db.session() as s:
            (t,) = jobs.get_job(s, key).tasks
            return t.state.value


def spec(name: str) -> JobSpec:
    return JobSpec(name=name, task_roles=(TaskRoleSpec("w", 1, "sleep 600", Resources(0, 1, 256)),), image="busybox")


@pytest.fixture
def steady(tmp_path: Path) -> Iterator[Steady]:
    with make_database("sqlite", tmp_path) as db:
        clock = Clock(1000.0)
        launcher = Launcher(db, LauncherConfig(node_timeout_seconds=30), clock=clock)
        register(launcher, "n1")
        launcher.submit(user("alice"), spec("j"), "{}")
        launcher.schedule_pass()
        (start,) = launcher.heartbeat(HeartbeatRequest("n1")).commands
        assert isinstance(start, StartTask)
        st = Steady(db, launcher, clock, start.attempt_id, Statements(db))
        assert st.sql.during(lambda: st.beat(st.running())) > 0  # RUNNING: the store records it
        assert st.sql.during(lambda: st.beat(st.running())) > 0  # nothing to do: the view is learnt
        yield st


def test_a_heartbeat_that_reports_what_is_expected_runs_no_sql(steady: Steady) -> None:
    replies: list[MasterReply] = []
    assert steady.sql.during(lambda: replies.append(steady.beat(steady.running()))) == 0
    assert replies[0].commands == ()
    assert steady.launcher.quiet_heartbeat(HeartbeatRequest("n1", (steady.running(),))) is not None


def test_quiet_heartbeats_keep_the_node_alive_and_their_time_is_stored_once_a_check(steady: Steady) -> None:
    for _ in range(10):  # 100 s of heartbeats answered from memory, past the 30 s node timeout
        steady.clock.now += 10
        steady.beat(steady.running())
        assert steady.launcher.check_nodes() == []
    with steady.db.session() as s:
        node = nodes.get_node(s, "n1")
    assert (node.state, node.last_heartbeat) == (NodeState.READY, steady.clock.now)


def test_a_heartbeat_waiting_for_the_store_keeps_its_node_alive(steady: Steady) -> None:
    """Liveness is judged from when a heartbeat arrives: one that waits behind a long transaction (here: never
    handled) does not make its node LOST, and its arrival, not a later time, is what is stored."""
    steady.clock.now += 25
    arrived = steady.clock.now
    exited = ContainerReport(steady.attempt, "alice~j", "w", 0, ContainerStatus.EXITED, exit_code=0)
    assert steady.launcher.quiet_heartbeat(HeartbeatRequest("n1", (exited,))) is None  # it waits for the writer
    steady.clock.now += 20  # 45 s since the last heartbeat the store handled, 20 s since this one arrived
    assert steady.launcher.check_nodes() == []
    with steady.db.session() as s:
        assert nodes.get_node(s, "n1").last_heartbeat == arrived
    steady.clock.now += 11
    assert steady.launcher.check_nodes() == ["n1"]  # and silence after it still counts


def test_the_nodes_view_shows_a_quiet_heartbeat_before_it_is_stored(steady: Steady) -> None:
    steady.clock.now += 7
    steady.beat(steady.running())
    ((node, _),) = steady.launcher.node_usage()
    assert node.last_heartbeat == steady.clock.now


def test_a_node_that_goes_silent_is_still_lost(steady: Steady) -> None:
    steady.beat(steady.running())
    steady.clock.now += 31
    assert steady.launcher.check_nodes() == ["n1"]
    steady.beat(steady.running())  # its view was forgotten: the store brings it back
    with steady.db.session() as s:
        assert nodes.get_node(s, "n1").state is NodeState.READY


def _exited(st: Steady) -> MasterReply:
    return st.beat(ContainerReport(st.attempt, "alice~j", "w", 0, ContainerStatus.EXITED, exit_code=0,
                                   finished_at=1001.0))


def _stopped_by_the_user(st: Steady) -> MasterReply:
    st.launcher.stop("alice~j", User("alice", admin=False))
    return st.beat(st.running())


def _a_second_job_placed_there(st: Steady) -> MasterReply:
    st.launcher.submit(user("alice"), spec("k"), "{}")
    st.launcher.schedule_pass()
    return st.beat(st.running())


def _a_gpu_failed(st: Steady) -> MasterReply:
    return st.beat(st.running(), gpus=(GpuHealth(0, healthy=False),))


def _lost_and_back(st: Steady) -> MasterReply:
    st.clock.now += 31
    st.launcher.check_nodes()
    return st.beat(st.running())


@dataclass(frozen=True)
class Case:
    name: str
    act: Callable[[Steady], MasterReply]
    check: Callable[[Steady, MasterReply], bool]


def _first_attempt(st: Steady) -> TaskAttempt:
    with st.db.session() as s:
        return history.list_attempts(s, jobs.get_job(s, "alice~j").id)[0]


def _node(st: Steady) -> Any:
    with st.db.session() as s:
        return nodes.get_node(s, "n1")


CASES = [
    Case("the task exited", _exited, lambda st, r: st.task_state() == "SUCCEEDED"),
    Case("the agent lost the container", lambda st: st.beat(),
         lambda st, r: _first_attempt(st).exit_code == PlatformExit.CONTAINER_LOST),
    Case("an unknown container runs", lambda st: st.beat(st.running(), st.running("stray")),
         lambda st, r: [c.attempt_id for c in r.commands if isinstance(c, StopTask)] == ["stray"]),
    Case("the user stopped the job", _stopped_by_the_user,
         lambda st, r: [c.attempt_id for c in r.commands if isinstance(c, StopTask)] == [st.attempt]),
    Case("a second job placed on the node", _a_second_job_placed_there,
         lambda st, r: [type(c) for c in r.commands] == [StartTask]),
    Case("a GPU failed", _a_gpu_failed, lambda st, r: _node(st).failed_gpus == (0,)),
    Case("a new problem", lambda st: st.beat(st.running(), problems=("disk full",)),
         lambda st, r: _node(st).problems == ("disk full",)),
    Case("the node was lost and is back", _lost_and_back, lambda st, r: _node(st).state is NodeState.READY),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_anything_new_goes_through_the_store(steady: Steady, case: Case) -> None:
    assert steady.sql.during(lambda: steady.beat(steady.running())) == 0  # quiet before
    replies: list[MasterReply] = []
    assert steady.sql.during(lambda: replies.append(case.act(steady))) > 0
    assert case.check(steady, replies[0])


def test_a_full_pass_forgets_every_quiet_view(steady: Steady) -> None:
    """The safety net: a task changed behind the launcher's back (here: made STOPPING in the store directly) is
    seen by the first heartbeat after the next full pass."""
    steady.beat(steady.running())
    with steady.db.session() as s:
        job = jobs.get_job(s, "alice~j")
        (t,) = job.tasks
        jobs.save_job(s, replace(job, tasks=(replace(t, state=TaskState.STOPPING, exit_reason="by hand"),)))
    assert steady.beat(steady.running()).commands == ()  # still quiet: the launcher did not see it
    steady.launcher.schedule_pass(full=True)
    reply = steady.beat(steady.running())
    assert [c.attempt_id for c in reply.commands if isinstance(c, StopTask)] == [steady.attempt]


def _two_node_job(db: Database) -> tuple[Launcher, dict[str, str]]:
    """Job alice~pair: two tasks that each fill a node, running on n1 and n2 (node -> attempt), both nodes' views
    learnt."""
    launcher = Launcher(db, LauncherConfig(node_timeout_seconds=30), clock=Clock(1000.0))
    for name in ("n1", "n2"):
        register(launcher, name)
    pair = JobSpec(name="pair", task_roles=(TaskRoleSpec("w", 2, "sleep 600", Resources(0, 2, 256)),),
                   image="busybox")
    launcher.submit(user("alice"), pair, "{}")
    launcher.schedule_pass()
    attempts: dict[str, str] = {}
    for name in ("n1", "n2"):
        (start,) = launcher.heartbeat(HeartbeatRequest(name)).commands
        assert isinstance(start, StartTask)
        attempts[name] = start.attempt_id
    for _ in range(2):  # RUNNING recorded, then nothing to do: learnt
        for name, attempt in attempts.items():
            launcher.heartbeat(HeartbeatRequest(name, (_report(attempt, ContainerStatus.RUNNING),)))
    return launcher, attempts


def _report(attempt: str, status: ContainerStatus, code: int | None = None) -> ContainerReport:
    return ContainerReport(attempt, "alice~pair", "w", 0, status, exit_code=code, started_at=1000.0,
                           finished_at=1001.0 if code is not None else None)


def test_heartbeats_of_one_batch_see_each_others_changes(tmp_path: Path) -> None:
    """In one transaction: n2 reports its task running (nothing to do: its view would be learnt), then n1 reports
    its task failed, which fails the job and stops n2's task. n2's view is not learnt, and the batch's later
    heartbeat of n2 gets the stop."""
    with make_database("sqlite", tmp_path) as db:
        launcher, attempts = _two_node_job(db)
        launcher.schedule_pass(full=True)  # views forgotten: every heartbeat below goes through the store
        failed = HeartbeatRequest("n1", (_report(attempts["n1"], ContainerStatus.EXITED, 1),))
        running_n2 = HeartbeatRequest("n2", (_report(attempts["n2"], ContainerStatus.RUNNING),))
        first, _, again, ghost = launcher.agent_batch([running_n2, failed, running_n2, HeartbeatRequest("ghost")])
        assert isinstance(first, MasterReply) and first.commands == ()
        assert isinstance(again, MasterReply) and isinstance(ghost, NoNodeError)
        assert [(type(c), c.attempt_id) for c in again.commands] == [(StopTask, attempts["n2"])]
        assert launcher.quiet_heartbeat(running_n2) is None
        (stop,) = launcher.heartbeat(running_n2).commands
        assert isinstance(stop, StopTask) and stop.attempt_id == attempts["n2"]


def test_a_batch_is_one_transaction(tmp_path: Path) -> None:
    with make_database("sqlite", tmp_path) as db:
        launcher, attempts = _two_node_job(db)
        begins: list[str] = []
        event.listen(db.engine, "begin", lambda conn: begins.append("begin"))
        reqs = [HeartbeatRequest(n, (_report(a, ContainerStatus.RUNNING),), problems=("disk full",))
                for n, a in attempts.items()]
        assert all(isinstance(r, MasterReply) for r in launcher.agent_batch(reqs))
        assert len(begins) == 1
        with db.session() as s:
            assert [n.problems for n in nodes.list_nodes(s)] == [("disk full",), ("disk full",)]


def _req(*reports: tuple[str, ContainerStatus]) -> HeartbeatRequest:
    return HeartbeatRequest("n1", tuple(ContainerReport(a, "alice~j", "w", 0, status) for a, status in reports))


R, E = ContainerStatus.RUNNING, ContainerStatus.EXITED
QUIET_CASES = [
    # (name, reports, the master's live attempts on the node, acted on, the attempts a quiet view expects)
    ("every expected attempt running and reported so", _req(("a", R), ("b", R)),
     {"a": TaskState.RUNNING, "b": TaskState.RUNNING}, False, frozenset({"a", "b"})),
    ("nothing expected, nothing reported", _req(), {}, False, frozenset()),
    ("the heartbeat was acted on", _req(("a", R)), {"a": TaskState.RUNNING}, True, None),
    ("an expected attempt is still WAITING on the master", _req(("a", R)), {"a": TaskState.WAITING}, False, None),
    ("an expected attempt is STOPPING on the master", _req(("a", R)), {"a": TaskState.STOPPING}, False, None),
    ("a reported container exited", _req(("a", E)), {"a": TaskState.RUNNING}, False, None),
    ("an expected attempt is not reported", _req(("a", R)),
     {"a": TaskState.RUNNING, "b": TaskState.RUNNING}, False, None),
    ("an unknown attempt is reported", _req(("a", R), ("x", R)), {"a": TaskState.RUNNING}, False, None),
    # The copies disagreed here: the store's side compared the set of reported ids and learnt {a}, a view that
    # the very heartbeat it was learnt from does not match.
    ("an attempt reported twice", _req(("a", R), ("a", R)), {"a": TaskState.RUNNING}, False, None),
]


@pytest.mark.parametrize(("req", "expected", "acted", "view"), [c[1:] for c in QUIET_CASES],
                         ids=[c[0] for c in QUIET_CASES])
def test_what_a_heartbeat_handled_by_the_store_teaches(req: HeartbeatRequest, expected: dict[str, TaskState],
                                                       acted: bool, view: frozenset[str] | None) -> None:
    learnt = quiet_attempts(req.containers, expected, acted)
    assert learnt == view
    if learnt is not None:  # a view learnt from a heartbeat is one that heartbeat matches
        assert Quiet(req.failed_gpus, req.problems, learnt).matches(req)
