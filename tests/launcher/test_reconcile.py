"""Reconciling an agent's reports with what the master expects on its node."""

from __future__ import annotations

from dataclasses import replace

from pai.domain.states import JobState, TaskState
from pai.launcher.lifecycle import Exited, Started, live_attempts
from pai.launcher.reconcile import NodeJobs, Placed, pending_starts, reconcile
from pai.protocol.exitcodes import PlatformExit
from pai.protocol.messages import ContainerReport, ContainerStatus
from tests.launcher.builders import job, role


def running_job():
    j = job(role("worker", 2))
    tasks = tuple(replace(t, node="n1", attempt_id=f"a{t.index}", state=TaskState.RUNNING if t.index == 0
                          else TaskState.WAITING) for t in j.tasks)
    return replace(j, state=JobState.RUNNING, tasks=tasks)


def report(aid: str, status: ContainerStatus, code: int | None = None) -> ContainerReport:
    return ContainerReport(aid, "alice~j", "worker", 0, status, code)


def test_running_report_of_a_waiting_task_starts_it() -> None:
    j = running_job()
    plan = reconcile((report("a1", ContainerStatus.RUNNING), report("a0", ContainerStatus.RUNNING)),
                     live_attempts([j]), 5.0, 10)
    assert plan.events == [(j.id, Started(5.0, "a1"))]
    assert plan.stops == []


def test_missing_running_attempt_is_lost_and_missing_waiting_one_is_started() -> None:
    j = running_job()
    plan = reconcile((), live_attempts([j]), 5.0, 10)
    assert plan.events == [(j.id, Exited(5.0, "a0", int(PlatformExit.CONTAINER_LOST), "the agent lost it"))]
    assert [t.attempt_id for _, t in pending_starts("n1", [j], set())] == ["a1"]
    assert pending_starts("n2", [j], set()) == []


def test_unknown_running_container_is_stopped() -> None:
    plan = reconcile((report("zzz", ContainerStatus.RUNNING), report("old", ContainerStatus.EXITED, 0)), {}, 5.0, 7)
    assert [(s.attempt_id, s.grace_seconds, s.exit_code) for s in plan.stops] == [("zzz", 7, int(PlatformExit.STOPPED))]
    assert plan.events == []


def test_stopping_task_gets_its_stop_code() -> None:
    j = running_job()
    t0 = replace(j.task("worker", 0), state=TaskState.STOPPING, exit_code=int(PlatformExit.PREEMPTED),
                 exit_reason="preempted by x")
    j = j.with_task(t0)
    plan = reconcile((report("a0", ContainerStatus.RUNNING),), live_attempts([j]), 5.0, 3)
    assert [(s.attempt_id, s.exit_code, s.reason) for s in plan.stops] == [
        ("a0", int(PlatformExit.PREEMPTED), "preempted by x")]


def test_exit_report_becomes_an_exit_event() -> None:
    j = running_job()
    plan = reconcile((report("a0", ContainerStatus.EXITED, 3), report("a1", ContainerStatus.RUNNING)),
                     live_attempts([j]), 5.0, 3)
    assert (j.id, Exited(5.0, "a0", 3, None)) in plan.events



def test_node_jobs_are_their_tasks_rows_until_loaded_whole() -> None:
    """A job is read as the rows of its tasks on the nodes read (on each of those nodes, in the rows' order) until it
    is loaded whole; one deleted since its rows were read is on no node."""
    j = running_job()
    a = j.with_task(replace(j.task("worker", 1), node="n2"))
    b = replace(a, id="other")
    rows = [(x.id, x.state, t) for x in (a, b) for t in x.tasks]
    on = NodeJobs.of(rows)
    assert on.jobs_on("n1") == on.jobs_on("n2") == [Placed(a.id, JobState.RUNNING, a.tasks),
                                                    Placed(b.id, JobState.RUNNING, b.tasks)]
    on.load({a.id, b.id}, [a])
    assert on.jobs_on("n1") == [a] and on.jobs_on("n2") == [a]
    assert on.unloaded({a.id, b.id}) == {b.id}
