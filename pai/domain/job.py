"""Jobs and their tasks: immutable values; changes make new values through ``with_*`` methods."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pai.domain.jobspec import JobSpec
from pai.domain.states import JobState, TaskState


def job_key(user: str, name: str) -> str:
    """OpenPAI's job identifier ``<user>~<job>``."""
    return f"{user}~{name}"


@dataclass(frozen=True, slots=True)
class Task:
    role: str
    index: int
    state: TaskState = TaskState.WAITING
    node: str | None = None
    address: str | None = None
    ports: dict[str, tuple[int, ...]] = field(default_factory=dict)
    gpus: tuple[int, ...] = ()
    attempt_id: str | None = None
    exit_code: int | None = None
    exit_reason: str | None = None
    retries: int = 0
    started_at: float | None = None
    finished_at: float | None = None

    def with_state(self, new: TaskState, **changes: Any) -> Task:
        return replace(self, state=self.state.to(new), **changes)

    def holds_node(self) -> bool:
        """Whether this task holds resources on a node: it is placed and its state holds (``TaskState.holds_node``)."""
        return self.node is not None and self.state.holds_node()


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    user: str
    spec: JobSpec
    state: JobState = JobState.WAITING
    submitted_at: float = 0.0
    started_at: float | None = None
    completed_at: float | None = None
    retries: int = 0  # job retries counted against ``retryCount`` (OpenPAI's retryDetails.user)
    platform_retries: int = 0  # requeues the platform caused (preempted, node lost): not counted
    exit_code: int | None = None
    exit_reason: str | None = None
    waiting_reason: dict[str, Any] | None = None
    preempted_by: str | None = None  # the job this one is being preempted for, until it is requeued
    tasks: tuple[Task, ...] = ()  # its members: an elastic job's grow and shrink with it (pai.launcher.resizing)
    last_resized_at: float | None = None  # when an elastic job last grew or shrank (None: never)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def key(self) -> str:
        return job_key(self.user, self.spec.name)

    @property
    def attempt_index(self) -> int:
        """The job attempt now running or last run (OpenPAI's ``attemptId``): every requeue starts a new one."""
        return self.retries + self.platform_retries

    @property
    def vc(self) -> str:
        return self.spec.virtual_cluster

    def with_state(self, new: JobState, **changes: Any) -> Job:
        return replace(self, state=self.state.to(new), **changes)

    def task(self, role: str, index: int) -> Task:
        for t in self.tasks:
            if t.role == role and t.index == index:
                return t
        raise KeyError((role, index))

    def with_task(self, task: Task) -> Job:
        tasks = tuple(task if (t.role, t.index) == (task.role, task.index) else t for t in self.tasks)
        return replace(self, tasks=tasks)


class Placement(Protocol):
    """What reconciling a node reads of a job: its id, its state, its tasks (a ``Job``, or ``Placed``: the tasks'
    rows of a job left undecoded, ``pai.launcher.reconcile``)."""

    @property
    def id(self) -> str: ...

    @property
    def state(self) -> JobState: ...

    @property
    def tasks(self) -> tuple[Task, ...]: ...


def initial_tasks(spec: JobSpec) -> tuple[Task, ...]:
    return tuple(Task(role=r.name, index=i) for r in spec.task_roles for i in range(r.instances))
