"""Who may change a job: its owner or an admin (checked inside the transaction that makes the change). What a
user's groups grant is ``pai.domain.groups``."""

from __future__ import annotations

from pai.domain.errors import ForbiddenUserError
from pai.store.records import User


def require_owner_or_admin(user: User, owner: str, action: str) -> None:
    if not user.admin and user.name != owner:
        raise ForbiddenUserError(f"user {user.name} may not {action} jobs of user {owner}")
