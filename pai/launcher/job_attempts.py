"""A job's attempts as OpenPAI shows them (pure): one per run of the whole job, numbered from 0.

A job starts attempt 0 when first admitted; every requeue (a retry counted against ``retryCount``, or one the
platform caused: preempted, node lost) starts the next (``Job.attempt_index``). The task attempts recorded with a
job attempt's number (``pai.store.history``) are that attempt's history; within it, a task's attempts are numbered
from 0 in the order they were made (a task-level retry makes the next). The latest job attempt is the job as it is
now; an earlier one is rebuilt from its task attempts: it ended when its last task attempt did, and what ended it
(OpenPAI's ``appExitTrigger*``) is the first task attempt that ended with an exit that was not a success or the
platform's own stop of what was left.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from pai.domain.job import Job
from pai.domain.states import JobState
from pai.protocol.exitcodes import PlatformExit
from pai.store.records import TaskAttempt

_NOT_A_CAUSE = (0, int(PlatformExit.COMPLETED_BY_POLICY), int(PlatformExit.SHRUNK))  # a shrink ends no attempt
TaskKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class JobAttempt:
    index: int
    latest: bool
    state: JobState
    started_at: float | None
    completed_at: float | None
    exit_code: int | None
    trigger: TaskAttempt | None  # the task attempt whose end ended this job attempt
    tasks: dict[TaskKey, list[TaskAttempt]]  # each task's attempts in this job attempt, oldest first

    def task_attempts(self, role: str, index: int) -> list[TaskAttempt]:
        return self.tasks.get((role, index), [])


def _order(a: TaskAttempt) -> tuple[bool, float]:
    return a.started_at is None, a.started_at or 0.0


def _by_task(attempts: Iterable[TaskAttempt]) -> dict[TaskKey, list[TaskAttempt]]:
    out: dict[TaskKey, list[TaskAttempt]] = defaultdict(list)
    for a in attempts:
        out[(a.role, a.index)].append(a)
    return {k: sorted(v, key=_order) for k, v in out.items()}


def _trigger(attempts: Iterable[TaskAttempt], exit_code: int | None = None) -> TaskAttempt | None:
    ended = sorted((a for a in attempts if a.finished_at is not None and a.exit_code not in _NOT_A_CAUSE),
                   key=lambda a: a.finished_at or 0.0)
    if exit_code is not None:
        ended = [a for a in ended if a.exit_code == exit_code] or ended
    return ended[0] if ended else None


def _ended_state(code: int | None) -> JobState:
    if code == 0:
        return JobState.SUCCEEDED
    if code == int(PlatformExit.STOPPED):
        return JobState.STOPPED
    return JobState.FAILED


def job_attempts(job: Job, history: list[TaskAttempt]) -> list[JobAttempt]:
    """Every attempt of the job that has run, oldest first; the last is the latest (the job now), also while it
    waits for its first admission."""
    grouped: dict[int, list[TaskAttempt]] = defaultdict(list)
    for a in history:
        grouped[a.job_attempt].append(a)
    out: list[JobAttempt] = []
    for index in sorted(i for i in grouped if i < job.attempt_index):
        rows = grouped[index]
        trigger = _trigger(rows)
        code = trigger.exit_code if trigger is not None else 0
        started = min((a.started_at for a in rows if a.started_at is not None), default=None)
        completed = max((a.finished_at for a in rows if a.finished_at is not None), default=None)
        out.append(JobAttempt(index, False, _ended_state(code), started, completed, code, trigger, _by_task(rows)))
    current = grouped.get(job.attempt_index, [])
    trigger = _trigger(current, job.exit_code) if job.state is JobState.FAILED else None
    out.append(JobAttempt(job.attempt_index, True, job.state, job.started_at, job.completed_at, job.exit_code,
                          trigger, _by_task(current)))
    return out


def find_attempt(attempts: list[JobAttempt], index: int) -> JobAttempt | None:
    for a in attempts:
        if a.index == index:
            return a
    return None
