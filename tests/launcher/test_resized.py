"""The lifecycle's ``Resized`` event (elastic jobs, issue 31): growth adds bound tasks that start as an admission's;
a shrink stops the highest indices with -402, drops each once it has exited, and never fails, retries or ends the
job because of them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pai.domain.job import Job
from pai.domain.jobspec import ElasticRange
from pai.domain.states import JobState, TaskState
from pai.launcher.job_attempts import job_attempts
from pai.launcher.lifecycle import (
    Admitted,
    AttemptEnded,
    AttemptStarted,
    Bound,
    Event,
    Exited,
    Note,
    Resized,
    Started,
    StopRequested,
    on_event,
)
from pai.launcher.snapshot import as_pending, as_running, leaving
from pai.protocol.exitcodes import PlatformExit
from pai.store.records import TaskAttempt
from pai.vc.snapshot import ElasticRole
from tests.launcher.builders import Counter, job, role
from tests.launcher.test_lifecycle import admit, attempts, run


def elastic(size: int = 2, low: int = 1, high: int = 4, *, retry_count: int = 0, task_retries: int = 0) -> Job:
    worker = replace(role("worker", size, gpu=1, task_retries=task_retries), elastic=ElasticRange(low, high))
    return job(worker, retry_count=retry_count)


def running(j: Job, ids: Counter) -> Job:
    j = admit(j, ids)
    return run(j, [Started(11.0, a) for a in attempts(j).values()], ids)


def grow(now: float, *indices: int) -> Resized:
    bound = tuple(Bound("worker", i, "n9", "10.0.0.9", {"http": (30000 + i,)}, (i,)) for i in indices)
    return Resized(now, "worker", 2 + len(indices), "idle-capacity", f"grew to {2 + len(indices)}: 1 GPU idle",
                   bindings=bound)


def shrink(now: float, *indices: int, size: int = 1) -> Resized:
    return Resized(now, "worker", size, "reclaim", f"shrank to {size}: VC `prod` reclaims 1 GPU", removed=indices)


def test_growth_adds_bound_tasks_that_start_like_an_admissions() -> None:
    ids = Counter()
    j = running(elastic(), ids)
    new, cmds = on_event(j, grow(20.0, 2, 3), ids)
    assert [(t.role, t.index) for t in new.tasks] == [("worker", 0), ("worker", 1), ("worker", 2), ("worker", 3)]
    t2 = new.task("worker", 2)
    assert (t2.state, t2.node, t2.address, t2.ports, t2.gpus) == (
        TaskState.WAITING, "n9", "10.0.0.9", {"http": (30002,)}, (2,))
    assert t2.attempt_id and t2.attempt_id not in attempts(j).values()
    assert [c.task.index for c in cmds if isinstance(c, AttemptStarted)] == [2, 3]
    note = next(c for c in cmds if isinstance(c, Note))
    assert (note.kind, note.message) == ("resized", "grew to 4: 1 GPU idle")
    assert note.details["added"] == [2, 3] and note.details["cause"] == "idle-capacity"
    assert new.state is JobState.RUNNING and new.last_resized_at == 20.0
    assert new.task("worker", 0) == j.task("worker", 0)  # its peers are untouched


def test_a_repeated_growth_changes_nothing() -> None:
    ids = Counter()
    j, _ = on_event(running(elastic(), ids), grow(20.0, 2), ids)
    again, cmds = on_event(j, grow(21.0, 2), ids)
    assert again == j and cmds == []


def test_shrink_stops_the_removed_tasks_gracefully_and_drops_them_once_exited() -> None:
    ids = Counter()
    j = running(elastic(3), ids)
    a = attempts(j)
    j, cmds = on_event(j, shrink(20.0, 2, 1), ids)
    stopping = [t for t in j.tasks if t.state is TaskState.STOPPING]
    assert [(t.index, t.exit_code) for t in stopping] == [(1, int(PlatformExit.SHRUNK)), (2, int(PlatformExit.SHRUNK))]
    assert stopping[0].exit_reason == "shrank to 1: VC `prod` reclaims 1 GPU"
    assert any(isinstance(c, Note) and c.kind == "resized" and c.details["removed"] == [2, 1] for c in cmds)
    assert j.last_resized_at == 20.0
    # the process exits on SIGTERM (143) or is killed after the grace period: neither is a failure
    j, cmds = on_event(j, Exited(25.0, a[("worker", 2)], 143), ids)
    assert [t.index for t in j.tasks] == [0, 1]
    ended = [c.task for c in cmds if isinstance(c, AttemptEnded)]
    assert [(t.index, t.state, t.exit_code) for t in ended] == [(2, TaskState.STOPPED, int(PlatformExit.SHRUNK))]
    j = run(j, [Exited(26.0, a[("worker", 1)], 137)], ids)
    assert [t.index for t in j.tasks] == [0]
    assert (j.state, j.retries, j.platform_retries, j.attempt_index) == (JobState.RUNNING, 0, 0, 0)
    assert j.task("worker", 0).state is TaskState.RUNNING


@pytest.mark.parametrize("code", [0, 1, 143, int(PlatformExit.NODE_LOST)])
def test_a_shrunk_task_exit_is_never_a_failure_nor_a_retry(code: int) -> None:
    ids = Counter()
    j = running(elastic(2, retry_count=3, task_retries=2), ids)
    a = attempts(j)
    j = run(j, [shrink(20.0, 1), Exited(25.0, a[("worker", 1)], code)], ids)
    assert (j.state, j.retries, j.platform_retries) == (JobState.RUNNING, 0, 0)
    assert [(t.index, t.state) for t in j.tasks] == [(0, TaskState.RUNNING)]


def test_the_job_still_ends_by_its_remaining_tasks() -> None:
    ids = Counter()
    j = running(elastic(2), ids)
    a = attempts(j)
    j = run(j, [shrink(20.0, 1), Exited(21.0, a[("worker", 0)], 0)], ids)
    assert j.state is JobState.RUNNING  # the leaving task still holds its node
    j = run(j, [Exited(22.0, a[("worker", 1)], 143)], ids)
    assert (j.state, j.exit_code) == (JobState.SUCCEEDED, 0)


def test_shrink_of_a_task_that_already_ended_leaves_it_as_it_ended() -> None:
    ids = Counter()
    j = running(elastic(3, task_retries=0), ids)
    a = attempts(j)
    j = run(j, [Exited(15.0, a[("worker", 2)], 0)], ids)
    j2, _ = on_event(j, shrink(20.0, 2, 1), ids)
    assert j2.task("worker", 2) == j.task("worker", 2)  # SUCCEEDED, counted as it ended
    assert j2.task("worker", 1).state is TaskState.STOPPING


def test_stop_while_shrinking_waits_for_every_task() -> None:
    ids = Counter()
    j = running(elastic(2), ids)
    a = attempts(j)
    events: list[Event] = [shrink(20.0, 1), StopRequested(21.0, "alice"), Exited(22.0, a[("worker", 0)], 143)]
    j = run(j, events, ids)
    assert j.state is JobState.STOPPING
    j = run(j, [Exited(23.0, a[("worker", 1)], 143)], ids)
    assert j.state is JobState.STOPPED and [t.index for t in j.tasks] == [0]


def test_a_job_not_running_ignores_a_resize() -> None:
    ids = Counter()
    j = elastic()
    assert on_event(j, grow(20.0, 2), ids) == (j, [])


def test_an_elastic_job_admitted_at_its_minimum_has_those_members_and_asks_its_size_again_when_requeued() -> None:
    ids = Counter()
    j = elastic(3, 2, 4)
    bound = tuple(Bound("worker", i, "n1", "10.0.0.1", {}, (i,)) for i in (0, 1))
    j, cmds = on_event(j, Admitted(10.0, bound), ids)
    assert j.state is JobState.RUNNING and [t.index for t in j.tasks] == [0, 1]
    assert any(isinstance(c, Note) and c.message == "admitted on n1 (elastic: worker 2 of 3 asked)" for c in cmds)
    a = attempts(j)
    j = run(j, [grow(20.0, 2), Exited(30.0, a[("worker", 0)], int(PlatformExit.NODE_LOST))], ids)
    j = run(j, [Exited(31.0, t.attempt_id or "", 143) for t in j.tasks if t.attempt_id != a[("worker", 0)]], ids)
    assert (j.state, j.platform_retries, j.last_resized_at) == (JobState.WAITING, 1, None)
    assert [(t.index, t.state, t.node) for t in j.tasks] == [(i, TaskState.WAITING, None) for i in range(3)]


def test_the_scheduler_sees_the_roles_ranges_the_last_resize_and_the_shrunk_tasks_as_leaving() -> None:
    ids = Counter()
    j = run(running(elastic(3, 1, 4), ids), [shrink(20.0, 2, size=2)], ids)
    pending = as_pending(elastic(3, 1, 4))
    assert pending.elastic == (ElasticRole("worker", 1, 4),)
    form = as_running(j)
    assert form is not None and form.elastic == pending.elastic and form.last_resized_at == 20.0
    assert sorted(t.index for t, _ in form.tasks) == [0, 1]
    gone = leaving(j)
    assert gone is not None and gone.key == "alice~j\x1fleaving" and gone.preempting and not gone.preempted_by
    assert [(t.index, node) for t, node in gone.tasks] == [(2, "n2")]
    assert leaving(running(elastic(3, 1, 4), Counter())) is None
    assert as_running(running(job(role("worker", 2)), Counter())).elastic == ()  # type: ignore[union-attr]


def test_a_shrunk_tasks_attempt_is_never_what_ended_a_job_attempt() -> None:
    j = replace(elastic(3), platform_retries=1)  # requeued once: attempt 0 is over
    ended = [("w2", 2, int(PlatformExit.SHRUNK), 5.0), ("w0", 0, int(PlatformExit.NODE_LOST), 10.0),
             ("w1", 1, int(PlatformExit.COMPLETED_BY_POLICY), 11.0)]
    rows = [TaskAttempt(a, j.id, 0, "worker", i, "n1", TaskState.STOPPED, exit_code=code, finished_at=at)
            for a, i, code, at in ended]
    first = job_attempts(j, rows)[0]
    assert first.trigger is not None and (first.trigger.index, first.exit_code) == (0, int(PlatformExit.NODE_LOST))
