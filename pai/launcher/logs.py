"""Where a task attempt's output lives: the node that ran it, and that node's log server; and, for a follower, every
attempt of a task and whether the task has ended."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from pai.domain.errors import NoTaskLogError, NoTaskRoleError
from pai.domain.job import Job, Task
from pai.domain.states import JobState
from pai.launcher.lifecycle import outcome
from pai.store import history, nodes
from pai.store import jobs as store_jobs
from pai.store.db import Database
from pai.store.records import TaskAttempt

MAX_LOG_BYTES = 16 << 20  # a full read serves at most the last 16 MB of a log (more: ask for a tail)


@dataclass(frozen=True, slots=True)
class LogLocation:
    attempt_id: str
    node: str
    address: str
    port: int
    number: int = 1  # the task's attempts, counted from 1
    started_at: float | None = None
    finished_at: float | None = None  # None while it has not ended


@dataclass(frozen=True, slots=True)
class TaskLogs:
    """A task's attempts that were placed on a node, oldest first, and whether the task has ended: its last attempt
    has ended and its job will start no other (``task_ended``). ``state`` is the task's, ``job_state`` the job's."""

    attempts: tuple[LogLocation, ...]
    ended: bool
    state: str
    job_state: str
    exit_code: int | None


def require_task(job: Job, role: str, index: int) -> Task:
    """The task ``role[index]`` of ``job``; NoTaskRoleError naming the role or the index when there is none."""
    roles = [r.name for r in job.spec.task_roles]
    if role not in roles:
        raise NoTaskRoleError(f"job {job.key} has no task role {role!r} (its roles: {', '.join(roles)})")
    indices = sorted(t.index for t in job.tasks if t.role == role)
    for t in job.tasks:
        if t.role == role and t.index == index:
            return t
    have = f"indices 0 to {indices[-1]}" if indices else "no tasks"
    raise NoTaskRoleError(f"task role {role} of job {job.key} has no index {index} (it has {have})")


def task_ended(job: Job, task: Task) -> bool:
    """Whether ``task`` will run no other attempt: its job has ended; or the task has ended and its job is being
    stopped, or goes on without it (no outcome yet: its other tasks run). A task that ended while its job retries or
    requeues (the job's outcome is being settled) has not ended: a new attempt follows."""
    if job.state.is_terminal():
        return True
    if not task.state.is_terminal():
        return False
    return job.state is JobState.STOPPING or (job.state is JobState.RUNNING and outcome(job) is None)


def _attempts_of(s: Session, job: Job, role: str, index: int) -> list[TaskAttempt]:
    return [a for a in history.list_attempts(s, job.id) if a.role == role and a.index == index]


def _location(s: Session, a: TaskAttempt, number: int) -> LogLocation:
    assert a.node is not None
    node = nodes.get_node(s, a.node)
    return LogLocation(a.attempt_id, node.name, node.address, nodes.get_log_port(s, node.name), number, a.started_at,
                       a.finished_at)


def locate(s: Session, key: str, role: str, index: int, attempt_id: str | None = None) -> LogLocation:
    """The latest attempt of task ``role[index]`` of job ``key``, or the attempt ``attempt_id`` (an earlier
    one). Raises NoJobError, NoTaskRoleError, NoTaskLogError."""
    job = store_jobs.get_job(s, key)
    require_task(job, role, index)
    attempts = list(enumerate(_attempts_of(s, job, role, index), start=1))
    if attempt_id is not None:
        attempts = [(n, a) for n, a in attempts if a.attempt_id == attempt_id]
        if not attempts:
            raise NoTaskLogError(f"task {role}[{index}] of job {key} has no attempt {attempt_id}")
    if not attempts or attempts[-1][1].node is None:
        raise NoTaskLogError(f"task {role}[{index}] of job {key} has no attempt yet")
    number, chosen = attempts[-1]
    return _location(s, chosen, number)


def task_logs(db: Database, key: str, role: str, index: int) -> TaskLogs:
    """Every placed attempt of task ``role[index]`` of job ``key`` and whether the task has ended. Raises NoJobError,
    NoTaskRoleError."""
    with db.session() as s:
        job = store_jobs.get_job(s, key)
        task = require_task(job, role, index)
        placed = [(n, a) for n, a in enumerate(_attempts_of(s, job, role, index), start=1) if a.node is not None]
        return TaskLogs(tuple(_location(s, a, n) for n, a in placed), task_ended(job, task), task.state.value,
                        job.state.value, task.exit_code)
