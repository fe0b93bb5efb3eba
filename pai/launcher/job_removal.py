"""Deleting a job (OpenPAI v0.14's ``DELETE /api/v1/user/{user}/jobs/{job}``): its owner or an admin, once it has
ended; its name is free again afterwards. An active job is refused (stop it first): deleting it would leave its
tasks running with no job to account for them."""

from __future__ import annotations

import logging

from pai.domain.errors import ConflictJobError
from pai.launcher.access import require_owner_or_admin
from pai.store import jobs as store_jobs
from pai.store.db import Database
from pai.store.records import User

log = logging.getLogger("pai.launcher")


def delete_job(db: Database, key: str, by: User) -> None:
    """Raises NoJobError, ForbiddenUserError, ConflictJobError (the job has not ended)."""
    with db.session() as s:
        job = store_jobs.get_job(s, key)
        require_owner_or_admin(by, job.user, "delete")
        if not job.state.is_terminal():
            raise ConflictJobError(f"job {key} is {job.state.value}: stop it first (PUT .../executionType "
                                   '{"value": "STOP"}), then delete it')
        store_jobs.delete_job(s, job.id)
    log.info("job deleted job=%s by=%s", key, by.name)
