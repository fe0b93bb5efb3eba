"""The job lifecycle state machine: named cases over event sequences."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pai.domain.job import Job
from pai.domain.states import JobState, TaskState
from pai.launcher.lifecycle import (
    Admitted,
    AttemptEnded,
    AttemptStarted,
    Bound,
    Event,
    Exited,
    Note,
    Preempted,
    Started,
    StopRequested,
    on_event,
)
from pai.protocol.exitcodes import PlatformExit
from tests.launcher.builders import Counter, job, role


def admit(j: Job, ids: Counter) -> Job:
    bindings = tuple(
        Bound(t.role, t.index, f"n{t.index}", f"127.0.0.{t.index + 2}", {"http": (20000 + t.index,)}, ())
        for t in j.tasks
    )
    new, _ = on_event(j, Admitted(10.0, bindings), ids)
    return new


def run(j: Job, events: list[Event], ids: Counter) -> Job:
    for ev in events:
        j, _ = on_event(j, ev, ids)
    return j


def attempts(j: Job) -> dict[tuple[str, int], str]:
    return {(t.role, t.index): t.attempt_id or "" for t in j.tasks}


def test_admission_places_every_task_and_records_attempts() -> None:
    ids = Counter()
    j = job(role("ps"), role("worker", 2))
    new, cmds = on_event(j, Admitted(5.0, tuple(
        Bound(t.role, t.index, "n1", "10.0.0.1", {"http": (1,)}, ()) for t in j.tasks)), ids)
    assert new.state is JobState.RUNNING and new.started_at == 5.0
    assert all(t.node == "n1" and t.attempt_id for t in new.tasks)
    assert len({t.attempt_id for t in new.tasks}) == 3
    assert sum(isinstance(c, AttemptStarted) for c in cmds) == 3
    assert any(isinstance(c, Note) and c.kind == "admitted" for c in cmds)


CASES = [
    # (name, roles, exits by (role, index) -> code, expected job state, expected job exit code)
    ("all succeed", (role("worker", 2),), {("worker", 0): 0, ("worker", 1): 0}, JobState.SUCCEEDED, 0),
    ("one fails with min_failed 1", (role("worker", 2),), {("worker", 0): 3, ("worker", 1): 143},
     JobState.FAILED, 3),
    ("failures ignored when min_failed is None", (role("worker", 2, min_failed=None),),
     {("worker", 0): 3, ("worker", 1): 0}, JobState.SUCCEEDED, 0),
    ("min_succeeded 1 completes the job early", (role("ps"), role("worker", 2, min_succeeded=1)),
     {("worker", 0): 0}, JobState.RUNNING, None),
    ("min_failed 2 tolerates one failure", (role("worker", 3, min_failed=2),),
     {("worker", 0): 1, ("worker", 1): 0, ("worker", 2): 0}, JobState.SUCCEEDED, 0),
]


@pytest.mark.parametrize(("name", "roles", "exits", "state", "code"), CASES, ids=[c[0] for c in CASES])
def test_completion_policy(name: str, roles: tuple, exits: dict, state: JobState, code: int | None) -> None:
    ids = Counter()
    j = admit(job(*roles), ids)
    a = attempts(j)
    j = run(j, [Started(11.0, aid) for aid in a.values()], ids)
    j = run(j, [Exited(12.0, a[k], c) for k, c in exits.items()], ids)
    assert j.state is state
    assert j.exit_code == code


def test_min_succeeded_stops_the_rest_then_succeeds() -> None:
    ids = Counter()
    j = admit(job(role("ps"), role("worker", 2, min_succeeded=1)), ids)
    a = attempts(j)
    j = run(j, [Started(11.0, aid) for aid in a.values()], ids)
    j = run(j, [Exited(12.0, a[("worker", 0)], 0)], ids)
    stopping = [t for t in j.tasks if t.state is TaskState.STOPPING]
    assert {(t.role, t.index) for t in stopping} == {("ps", 0), ("worker", 1)}
    assert all(t.exit_code == PlatformExit.COMPLETED_BY_POLICY for t in stopping)
    j = run(j, [Exited(13.0, t.attempt_id or "", 143) for t in stopping], ids)
    assert j.state is JobState.SUCCEEDED


def test_failure_stops_others_and_keeps_the_culprits_code() -> None:
    ids = Counter()
    j = admit(job(role("worker", 2)), ids)
    a = attempts(j)
    j = run(j, [Started(11.0, aid) for aid in a.values()], ids)
    j = run(j, [Exited(12.0, a[("worker", 1)], 3)], ids)
    assert j.state is JobState.RUNNING
    assert j.task("worker", 0).state is TaskState.STOPPING
    j = run(j, [Exited(13.0, a[("worker", 0)], 137)], ids)
    assert j.state is JobState.FAILED and j.exit_code == 3
    assert j.task("worker", 0).state is TaskState.STOPPED
    assert j.task("worker", 1).exit_code == 3


def test_job_retry_requeues_and_counts() -> None:
    ids = Counter()
    j = admit(job(role("worker", 1), retry_count=1), ids)
    a = attempts(j)
    j = run(j, [Started(11.0, a[("worker", 0)]), Exited(12.0, a[("worker", 0)], 1)], ids)
    assert j.state is JobState.WAITING and j.retries == 1
    assert j.task("worker", 0).node is None and j.task("worker", 0).attempt_id is None
    j = admit(j, ids)
    a = attempts(j)
    j = run(j, [Exited(13.0, a[("worker", 0)], 1)], ids)
    assert j.state is JobState.FAILED and j.retries == 1


RETRY_CASES = [
    # (name, retryCount, exit code of each job attempt in turn, final state, job retries)
    ("0: the first failure fails the job", 0, [1], JobState.FAILED, 0),
    ("2: two retries, then the failure stands", 2, [1, 1, 1], JobState.FAILED, 2),
    ("-1: unknown failures retried past any count", -1, [1, 1, 1, 1, 1, 0], JobState.SUCCEEDED, 5),
    ("-1: a permanent failure is not retried", -1, [int(PlatformExit.CODE_DIR_MISSING)], JobState.FAILED, 0),
    ("-1: success ends the job", -1, [0], JobState.SUCCEEDED, 0),
    ("-2: success is retried", -2, [0, 0, 0], JobState.WAITING, 3),
    ("-2: a permanent failure is retried", -2, [int(PlatformExit.CODE_DIR_MISSING), 1], JobState.WAITING, 2),
    ("0: an unreachable registry (-102) requeues, not counted", 0,
     [int(PlatformExit.IMAGE_PULL_FAILED), int(PlatformExit.IMAGE_PULL_FAILED), 0], JobState.SUCCEEDED, 0),
    ("0: an unreachable registry (-102) never fails the job", 0,
     [int(PlatformExit.IMAGE_PULL_FAILED)] * 3, JobState.WAITING, 0),
    ("3: an image the registry does not have (-101) is not retried", 3, [int(PlatformExit.IMAGE_NOT_FOUND)],
     JobState.FAILED, 0),
]


@pytest.mark.parametrize(("name", "retry_count", "exits", "state", "retries"), RETRY_CASES,
                         ids=[c[0] for c in RETRY_CASES])
def test_retry_count(name: str, retry_count: int, exits: list[int], state: JobState, retries: int) -> None:
    ids = Counter()
    j = job(role("worker", 1), retry_count=retry_count)
    for n, code in enumerate(exits):
        assert j.state is JobState.WAITING, f"attempt {n} found the job {j.state}"
        j = admit(j, ids)
        a = attempts(j)[("worker", 0)]
        j = run(j, [Started(11.0 + n, a), Exited(12.0 + n, a, code)], ids)
    assert (j.state, j.retries) == (state, retries)


def test_retry_count_minus_two_runs_until_stopped() -> None:
    ids = Counter()
    j = admit(job(role("worker", 1), retry_count=-2), ids)
    a = attempts(j)[("worker", 0)]
    j, cmds = on_event(j, Exited(12.0, a, 0), ids)
    assert j.state is JobState.WAITING
    assert [c.message for c in cmds if isinstance(c, Note) and c.kind == "retried"] == [
        "job succeeded; job retry 1 (retryCount -2: retried after every exit until stopped)"]
    j = admit(j, ids)
    j = run(j, [Started(13.0, attempts(j)[("worker", 0)]), StopRequested(14.0, "alice")], ids)
    j = run(j, [Exited(15.0, attempts(j)[("worker", 0)], 143)], ids)
    assert j.state is JobState.STOPPED and j.retries == 1


def test_permanent_exit_is_not_retried() -> None:
    ids = Counter()
    j = admit(job(role("worker", 1), retry_count=3), ids)
    a = attempts(j)
    j = run(j, [Exited(12.0, a[("worker", 0)], int(PlatformExit.CODE_DIR_MISSING), "no such dir")], ids)
    assert j.state is JobState.FAILED and j.retries == 0
    assert j.exit_reason == "no such dir"


def test_task_retry_restarts_the_task_in_place() -> None:
    ids = Counter()
    j = admit(job(role("worker", 2, task_retries=1)), ids)
    a = attempts(j)
    j = run(j, [Started(11.0, aid) for aid in a.values()], ids)
    j, cmds = on_event(j, Exited(12.0, a[("worker", 0)], 2), ids)
    t = j.task("worker", 0)
    assert t.state is TaskState.WAITING and t.retries == 1 and t.attempt_id not in a.values()
    assert t.node == "n0"
    assert [type(c) for c in cmds if not isinstance(c, Note)] == [AttemptEnded, AttemptStarted]
    j = run(j, [Exited(13.0, t.attempt_id or "", 2)], ids)
    assert j.task("worker", 0).state is TaskState.FAILED
    assert j.task("worker", 1).state is TaskState.STOPPING


def test_stop_while_waiting_is_immediate() -> None:
    waiting = replace(job(), waiting_reason={"code": "NoNodeFits", "message": "..."})
    j, _cmds = on_event(waiting, StopRequested(3.0, "alice"), Counter())
    assert j.state is JobState.STOPPED and j.completed_at == 3.0 and j.waiting_reason is None


def test_stop_while_running_stops_every_task() -> None:
    ids = Counter()
    j = admit(job(role("worker", 2)), ids)
    a = attempts(j)
    j = run(j, [Started(11.0, a[("worker", 0)]), StopRequested(12.0, "alice")], ids)
    assert j.state is JobState.STOPPING
    assert all(t.state is TaskState.STOPPING and t.exit_code == PlatformExit.STOPPED for t in j.tasks)
    j = run(j, [Exited(13.0, a[("worker", 0)], 0)], ids)
    assert j.state is JobState.STOPPING
    j = run(j, [Exited(13.5, a[("worker", 1)], 143)], ids)
    assert j.state is JobState.STOPPED
    assert {t.state for t in j.tasks} == {TaskState.STOPPED}


def test_preemption_requeues_without_counting_and_names_the_preemptor() -> None:
    ids = Counter()
    j = admit(job(role("worker", 1), retry_count=0), ids)
    a = attempts(j)
    j, cmds = on_event(j, Preempted(20.0, "bob~big", "reclaim", "VC b reclaims its guarantee"), ids)
    notes = [c for c in cmds if isinstance(c, Note)]
    assert notes and "bob~big" in notes[0].message and "reclaim" in notes[0].message
    assert j.task("worker", 0).state is TaskState.STOPPING
    j = run(j, [Exited(21.0, a[("worker", 0)], 143)], ids)
    assert j.state is JobState.WAITING and j.retries == 0


def test_stale_and_repeated_reports_are_ignored() -> None:
    ids = Counter()
    j = admit(job(role("worker", 1)), ids)
    a = attempts(j)
    once = run(j, [Exited(12.0, a[("worker", 0)], 0)], ids)
    twice = run(once, [Exited(13.0, a[("worker", 0)], 5), Exited(13.0, "unknown", 1)], ids)
    assert twice == once


def test_node_lost_is_transient() -> None:
    ids = Counter()
    j = admit(job(role("worker", 2), retry_count=0), ids)
    a = attempts(j)
    j = run(j, [Started(11.0, aid) for aid in a.values()], ids)
    j = run(j, [Exited(12.0, a[("worker", 0)], int(PlatformExit.NODE_LOST))], ids)
    assert j.task("worker", 1).state is TaskState.STOPPING
    j = run(j, [Exited(13.0, a[("worker", 1)], 143)], ids)
    assert j.state is JobState.WAITING and j.retries == 0


def test_started_report_marks_the_attempt_running() -> None:
    ids = Counter()
    j = admit(job(role("worker", 1)), ids)
    a = attempts(j)[("worker", 0)]
    j, cmds = on_event(j, Started(11.0, a), ids)
    assert [type(c).__name__ for c in cmds] == ["AttemptRunning"]
    assert j.task("worker", 0).started_at == 11.0


def test_requeue_clears_the_last_exit_and_the_task_retry_budget() -> None:
    ids = Counter()
    j = admit(job(role("worker", 2, task_retries=1), retry_count=1), ids)
    a = attempts(j)
    j = run(j, [Started(11.0, aid) for aid in a.values()], ids)
    j = run(j, [Exited(12.0, a[("worker", 0)], 2)], ids)  # task retry: retries 1
    t = j.task("worker", 0)
    j = run(j, [Exited(13.0, t.attempt_id or "", 2)], ids)  # out of task retries: the job fails, retries once
    j = run(j, [Exited(14.0, a[("worker", 1)], 143)], ids)
    assert j.state is JobState.WAITING and j.retries == 1
    assert all(t.exit_code is None and t.retries == 0 for t in j.tasks)
