"""Who may change a job: its owner or an admin (checked inside the transaction that makes the change); who may
read one: everyone, unless the configuration's ``access.jobsReadableByAll`` is false (then its owner or an admin).
What a user's groups grant is ``pai.domain.groups``.

Where users read their own jobs only, nothing shows them another user's job by name either: a node's tasks
(``visible_tasks``) and every answer about a job (its waiting reason, its events: who preempted it, which
non-preemptible job holds the capacity, which jobs must end first) pass through ``hide_other_users_jobs``."""

from __future__ import annotations

import re
from typing import Any

from pai.domain.errors import ForbiddenUserError
from pai.store.records import User

# A job key ``user~name`` inside any text (a user name is ``[\w.-]+``, a job name ``[A-Za-z0-9._-]+``).
_JOB_KEY = re.compile(r"(?<![\w.~-])([\w.-]+)~[A-Za-z0-9._-]+")
OTHER_USERS_JOB = "another user's job"


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


def hide_other_users_jobs(value: Any, user: User, readable_by_all: bool) -> Any:
    """``value`` (a JSON answer: dicts, lists, strings) with every job key of a user whose jobs ``user`` may not
    read replaced by ``OTHER_USERS_JOB``; ``value`` itself when every key may be shown."""
    if readable_by_all or user.admin:
        return value

    def text(s: str) -> str:
        return _JOB_KEY.sub(lambda m: m[0] if m[1] == user.name else OTHER_USERS_JOB, s) if "~" in s else s

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return text(v)
        if isinstance(v, dict):
            return {text(k) if isinstance(k, str) else k: walk(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [walk(x) for x in v]
        return v

    return walk(value)
