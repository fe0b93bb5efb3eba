"""When a follower of a task's log stops (``task_ended``), and how an unknown role or index is named."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pai.domain.errors import NoTaskRoleError
from pai.domain.job import Job
from pai.domain.states import JobState, TaskState
from pai.launcher.logs import require_task, task_ended

from .builders import job, role

J, T = JobState, TaskState


def two_workers(job_state: JobState, first: TaskState, second: TaskState, min_failed: int | None = 1) -> Job:
    j = job(role("worker", 2, min_failed=min_failed))
    tasks = (replace(j.tasks[0], state=first), replace(j.tasks[1], state=second))
    return replace(j, state=job_state, tasks=tasks)


@pytest.mark.parametrize(("j", "ended"), [
    pytest.param(two_workers(J.SUCCEEDED, T.SUCCEEDED, T.SUCCEEDED), True, id="the job ended"),
    pytest.param(two_workers(J.FAILED, T.FAILED, T.STOPPED), True, id="the job failed"),
    pytest.param(two_workers(J.RUNNING, T.RUNNING, T.RUNNING), False, id="it runs"),
    pytest.param(two_workers(J.RUNNING, T.SUCCEEDED, T.RUNNING), True, id="it ended, the job goes on without it"),
    pytest.param(two_workers(J.RUNNING, T.FAILED, T.STOPPING), False,
                 id="it failed the job, which is settling (and may retry it)"),
    pytest.param(two_workers(J.RUNNING, T.FAILED, T.RUNNING, min_failed=2), True,
                 id="it failed, not enough to fail the job"),
    pytest.param(two_workers(J.STOPPING, T.STOPPED, T.STOPPING), True, id="stopped with its job"),
    pytest.param(two_workers(J.STOPPING, T.STOPPING, T.STOPPING), False, id="still being stopped"),
    pytest.param(two_workers(J.WAITING, T.WAITING, T.WAITING), False, id="requeued: a new attempt comes"),
])
def test_a_task_has_ended_when_its_job_will_start_no_other_attempt_of_it(j: Job, ended: bool) -> None:
    assert task_ended(j, j.tasks[0]) is ended


def test_an_unknown_role_or_index_is_named() -> None:
    j = job(role("ps"), role("worker", 2))
    assert require_task(j, "worker", 1).index == 1
    with pytest.raises(NoTaskRoleError, match=r"job alice~j has no task role 'nosuch' \(its roles: ps, worker\)"):
        require_task(j, "nosuch", 0)
    with pytest.raises(NoTaskRoleError, match=r"role worker of job alice~j has no index 2 \(it has indices 0 to 1\)"):
        require_task(j, "worker", 2)
