"""Who may change a job: its owner or an admin. Checked inside the transaction that makes the change."""

from __future__ import annotations

from pai.domain.errors import ForbiddenUserError
from pai.store.records import User


def require_owner_or_admin(user: User, owner: str, action: str) -> None:
    if not user.admin and user.name != owner:
        raise ForbiddenUserError(f"user {user.name} may not {action} jobs of user {owner}")
