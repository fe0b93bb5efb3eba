"""Reads for the REST API: the job list, a job's detail, its submitted text, its attempts. Each is one
read-only transaction; the REST handlers run these on the store's reader threads (``StoreThread.read``), so a
scheduling pass never holds them up, and never open a session themselves.

The list follows OpenPAI's rule: a page holds ``DEFAULT_LIMIT`` jobs unless the client asks for fewer or more,
and never more than ``MAX_LIMIT`` (past it: InvalidParametersError naming ``limit``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pai.domain.errors import InvalidParametersError
from pai.domain.job import Job
from pai.store import history, tags
from pai.store import jobs as store_jobs
from pai.store.db import Database
from pai.store.records import JobEvent, TaskAttempt
from pai.store.summaries import JobFilters, JobSummary, Order, list_summaries

DEFAULT_LIMIT = 5_000
MAX_LIMIT = 50_000

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "JobDetail",
    "JobFilters",
    "JobPage",
    "JobSummary",
    "Order",
    "job_attempts",
    "job_config_text",
    "job_detail",
    "list_jobs",
]


@dataclass(frozen=True, slots=True)
class JobPage:
    jobs: list[JobSummary]
    total: int | None  # every match, ignoring offset and limit; None unless the filters asked for it


@dataclass(frozen=True, slots=True)
class JobDetail:
    job: Job
    events: list[JobEvent]
    attempts: list[TaskAttempt]  # every task attempt, oldest first
    tags: list[str]


def list_jobs(db: Database, filters: JobFilters) -> JobPage:
    """One page of job summaries. Raises InvalidParametersError for a limit past ``MAX_LIMIT``."""
    if filters.limit > MAX_LIMIT:
        raise InvalidParametersError(f"limit: {filters.limit} is greater than the maximum of {MAX_LIMIT}",
                                     field="limit")
    with db.session() as s:
        jobs, total = list_summaries(s, filters)
    return JobPage(jobs, total)


def job_detail(db: Database, key: str) -> JobDetail:
    """The job ``user~name`` with its tasks, events, task attempts and tags. Raises NoJobError."""
    with db.session() as s:
        job = store_jobs.get_job(s, key)
        return JobDetail(job, history.list_events(s, job.id), history.list_attempts(s, job.id),
                         tags.tags_of(s, job.id))


def job_config_text(db: Database, key: str) -> str:
    """The job exactly as it was submitted (YAML or JSON text). Raises NoJobError."""
    with db.session() as s:
        return store_jobs.get_config_text(s, key)


def job_attempts(db: Database, key: str) -> list[TaskAttempt]:
    """Every task attempt of the job, oldest first. Raises NoJobError."""
    with db.session() as s:
        return history.list_attempts(s, store_jobs.get_job(s, key).id)
