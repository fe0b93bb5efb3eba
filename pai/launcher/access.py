"""Who may change a job: its owner or an admin (checked inside the transaction that makes the change); who may
read one: everyone, unless the configuration's ``access.jobsReadableByAll`` is false (then its owner or an admin).
What a user's groups grant is ``pai.domain.groups``."""

from __future__ import annotations

from pai.domain.errors import ForbiddenUserError
from pai.store.records import User


def require_owner_or_admin(user: User, owner: str, action: str) -> None:
    if not user.admin and user.name != owner:
        raise ForbiddenUserError(f"user {user.name} may not {action} jobs of user {owner}")


def owner_of(key: str) -> str:
    """The user of a job key ``user~name``."""
    return key.partition("~")[0]


def may_read_jobs_of(user: User, owner: str, readable_by_all: bool) -> bool:
    return readable_by_all or user.admin or user.name == owner


def require_reader(user: User, owner: str, readable_by_all: bool) -> None:
    if not may_read_jobs_of(user, owner, readable_by_all):
        raise ForbiddenUserError(f"user {user.name} may not read jobs of user {owner}: on this cluster users read "
                                 "their own jobs only (access.jobsReadableByAll is false)")
