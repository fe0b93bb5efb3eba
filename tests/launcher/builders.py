"""Small builders for launcher tests."""

from __future__ import annotations

from pai.domain.job import Job, initial_tasks
from pai.domain.jobspec import JobSpec, PortSpec, TaskRoleSpec
from pai.domain.resources import Resources
from pai.store.records import User


def role(name: str, instances: int = 1, *, gpu: int = 0, cpu: int = 1, mem: int = 256, min_failed: int | None = 1,
         min_succeeded: int | None = None, task_retries: int = 0, ports: tuple[PortSpec, ...] = ()) -> TaskRoleSpec:
    return TaskRoleSpec(
        name=name, instances=instances, command=f"echo {name}", resources=Resources(gpu, cpu, mem),
        min_failed=min_failed, min_succeeded=min_succeeded, task_retry_count=task_retries, ports=ports,
    )


def job(*roles: TaskRoleSpec, name: str = "j", user: str = "alice", retry_count: int = 0) -> Job:
    spec = JobSpec(name=name, task_roles=roles or (role("worker", 2),), retry_count=retry_count, image="busybox")
    return Job(id=f"id-{name}", user=user, spec=spec, submitted_at=1.0, tasks=initial_tasks(spec))


class Counter:
    """A deterministic attempt-id source."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"a{self.n}"


class Clock:
    """A clock the test sets."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def user(name: str = "alice", *vcs: str) -> User:
    """A caller as a request resolves one: in ``default`` and the groups of ``vcs``."""
    return User(name, groups=("default", *vcs), virtual_clusters=frozenset({"default", *vcs}))
