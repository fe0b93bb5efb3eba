"""Tagging a job (OpenPAI's ``PUT``/``DELETE /api/v2/jobs/{job}/tag``): its owner or an admin, checked in the
transaction that makes the change."""

from __future__ import annotations

from pai.domain.errors import InvalidParametersError
from pai.launcher.access import require_owner_or_admin
from pai.store import jobs as store_jobs
from pai.store import tags
from pai.store.db import Database
from pai.store.records import User


def check_tag(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidParametersError('value: a tag is a non-empty string, like {"value": "baseline"}', field="value")
    if len(value) > tags.MAX_LENGTH:
        raise InvalidParametersError(f"value: a tag is at most {tags.MAX_LENGTH} characters", field="value")
    return value


def add_tag(db: Database, key: str, tag: str, by: User) -> bool:
    """Tag the job ``key``; False when it had the tag already. Raises NoJobError, ForbiddenUserError."""
    with db.session() as s:
        job = store_jobs.get_job(s, key)
        require_owner_or_admin(by, job.user, "tag")
        return tags.add_tag(s, job.id, check_tag(tag))


def remove_tag(db: Database, key: str, tag: str, by: User) -> bool:
    """Untag the job ``key``; False when it did not have the tag. Raises NoJobError, ForbiddenUserError."""
    with db.session() as s:
        job = store_jobs.get_job(s, key)
        require_owner_or_admin(by, job.user, "untag")
        return tags.remove_tag(s, job.id, check_tag(tag))
