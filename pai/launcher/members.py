"""An elastic job's membership now (pai.protocol.members): what the agents keep in each task's members file."""

from __future__ import annotations

from pai.domain.job import Job, Task
from pai.launcher.lifecycle import shrinking
from pai.protocol.members import JobMembers, Member


def is_member(t: Task) -> bool:
    """Placed, not ended, and not leaving because its job shrank."""
    return t.address is not None and not t.state.is_terminal() and not shrinking(t)


def members_of(job: Job) -> JobMembers | None:
    """Every role's members in index order; None for a job that never resizes."""
    if not job.spec.is_elastic:
        return None
    roles = {r.name: tuple(Member(t.index, t.address or "", dict(t.ports))
                           for t in sorted(job.tasks, key=lambda t: t.index) if t.role == r.name and is_member(t))
             for r in job.spec.task_roles}
    return JobMembers(job.key, roles)
