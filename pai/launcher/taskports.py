"""Where a running task's labelled port is: its node's address and the port the task was given for the label (tasks
use the node's network: ``node.address:port`` is the task's own ``localhost:port``)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from pai.domain.errors import NoTaskPortError, NoTaskRoleError, TaskNotRunningError
from pai.domain.job import Job, Task
from pai.domain.states import TaskState
from pai.store import jobs as store_jobs


@dataclass(frozen=True, slots=True)
class TaskPort:
    key: str  # the job's, user~name
    job_id: str
    role: str
    index: int
    label: str
    attempt_id: str
    node: str
    address: str
    port: int

    @property
    def task(self) -> str:
        return f"{self.role}[{self.index}]"


def find_task(job: Job, role: str, index: int) -> Task:
    """Task ``role[index]`` of ``job``; NoTaskRoleError naming the job's roles, or the role's indices."""
    roles = [r.name for r in job.spec.task_roles]
    if role not in roles:
        raise NoTaskRoleError(f"job {job.key} has no task role {role!r} (its roles: {', '.join(roles)})",
                              field="role")
    members = [t for t in job.tasks if t.role == role]
    found = next((t for t in members if t.index == index), None)
    if found is None:
        count = len(members)
        which = ", ".join(str(t.index) for t in members) if job.spec.is_elastic else f"0..{count - 1}"
        raise NoTaskRoleError(f"task role {role} of job {job.key} has no index {index} (it has {count} instance"
                              f"{'s' if count != 1 else ''}: {which})", field="index")
    return found


def running_port(job: Job, role: str, index: int, label: str) -> TaskPort:
    """The port labelled ``label`` of task ``role[index]`` while it runs (pure). Raises NoTaskRoleError,
    TaskNotRunningError, NoTaskPortError (naming the labels the task has)."""
    return _port(job.key, job.id, find_task(job, role, index), label)


def _port(key: str, job_id: str, task: Task, label: str) -> TaskPort:
    where = f"task {task.role}[{task.index}] of job {key}"
    if task.state is not TaskState.RUNNING or task.node is None or task.address is None or task.attempt_id is None:
        raise TaskNotRunningError(f"{where} is not running (state {task.state.value})")
    ports = task.ports.get(label)
    if not ports:
        labels = ", ".join(task.ports) or "none"
        raise NoTaskPortError(f"{where} has no port labelled {label!r} (its labels: {labels})", field="label")
    return TaskPort(key, job_id, task.role, task.index, label, task.attempt_id, task.node, task.address, ports[0])


def locate_port(s: Session, key: str, role: str, index: int, label: str) -> TaskPort:
    """``running_port`` of job ``key`` as stored, reading the task's row alone; the whole job only to say what is
    wrong (NoJobError, NoTaskRoleError naming what the job has)."""
    found = store_jobs.find_task(s, key, role, index)
    if found is None:
        return running_port(store_jobs.get_job(s, key), role, index, label)
    job_id, task = found
    return _port(key, job_id, task, label)
