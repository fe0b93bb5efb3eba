"""Who may do what: a job is changed by its owner or an admin (checked inside the transaction that makes the
change); a user's groups decide which storages they may mount."""

from __future__ import annotations

from pai.domain.errors import ForbiddenUserError
from pai.store.records import User


def require_owner_or_admin(user: User, owner: str, action: str) -> None:
    if not user.admin and user.name != owner:
        raise ForbiddenUserError(f"user {user.name} may not {action} jobs of user {owner}")


DEFAULT_GROUP = "default"  # every user's
ADMIN_GROUP = "admingroup"  # OpenPAI's group of the admins


def groups_of(user: User) -> frozenset[str]:
    """The groups ``user`` belongs to: OpenPAI's ``default`` group, and ``admingroup`` for an admin."""
    return frozenset({DEFAULT_GROUP, ADMIN_GROUP} if user.admin else {DEFAULT_GROUP})
