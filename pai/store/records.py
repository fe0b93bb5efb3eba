"""Values the store returns that the domain does not define: users, task attempts, job events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pai.domain.states import TaskState


@dataclass(frozen=True, slots=True)
class User:
    """A user and what their groups grant (``pai.domain.groups.rights_of``; an admin may use every VC)."""

    name: str
    admin: bool = False
    groups: tuple[str, ...] = ()
    virtual_clusters: frozenset[str] = frozenset()
    storages: frozenset[str] = frozenset()  # granted by their groups' acls.storageConfigs

    def may_use_vc(self, vc: str) -> bool:
        return self.admin or vc in self.virtual_clusters


@dataclass(frozen=True, slots=True)
class UserProfile:
    """A user as OpenPAI's user API shows one: the user, their e-mail and their free-form extension."""

    user: User
    email: str = ""
    extension: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a token speaks for: its user, and what kind of token it is (OpenPAI's application tokens never expire
    and may not manage tokens or log out)."""

    user: User
    expires_at: float | None  # None: never
    application: bool = False
    created_at: float = 0.0

    def valid_at(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now


@dataclass(frozen=True, slots=True)
class TaskAttempt:
    """One run of one task instance; kept forever as the job's attempt history."""

    attempt_id: str
    job_id: str
    job_attempt: int  # the job's retry number this attempt belongs to (0 for the first)
    role: str
    index: int
    node: str | None = None
    state: TaskState = TaskState.RUNNING
    exit_code: int | None = None
    exit_reason: str | None = None
    started_at: float | None = None
    finished_at: float | None = None


@dataclass(frozen=True, slots=True)
class JobEvent:
    """A line of a job's history, e.g. kind ``preempted``: "preempted by alice~big under reclaim of VC dev"."""

    job_id: str
    at: float
    kind: str
    message: str
    details: dict[str, Any] | None = None
    id: int | None = None  # assigned by the database
