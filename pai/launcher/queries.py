"""Reads for the REST API: the job list, a job's detail, its submitted text, its attempts. Each is one
read-only transaction; the REST handlers run these on the store's reader threads (``StoreThread.read``), so a
scheduling pass never holds them up, and never open a session themselves.

The list follows OpenPAI's rule: a page holds ``DEFAULT_LIMIT`` jobs unless the client asks for fewer or more,
and never more than ``MAX_LIMIT`` (past it: InvalidParametersError naming ``limit``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pai.domain.errors import InvalidParametersError, NoVirtualClusterError
from pai.domain.job import Job
from pai.domain.states import JobState
from pai.launcher.cluster import ClusterCache
from pai.store import experiments as store_experiments
from pai.store import history, stats, tags
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
    "job_counts",
    "job_detail",
    "list_jobs",
    "vc_queue",
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
    trial: TrialOf | None = None  # the job is a trial of this experiment


@dataclass(frozen=True, slots=True)
class TrialOf:
    experiment: str  # user~name
    number: int
    trial_id: int


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
        trial = store_experiments.trial_of_job(s, job.id)
        of = None
        if trial is not None:
            experiment = store_experiments.get_experiment_by_id(s, trial.experiment_id)
            of = TrialOf(experiment.key, trial.number, trial.id)
        return JobDetail(job, history.list_events(s, job.id), history.list_attempts(s, job.id),
                         tags.tags_of(s, job.id), of)


def job_config_text(db: Database, key: str) -> str:
    """The job exactly as it was submitted (YAML or JSON text). Raises NoJobError."""
    with db.session() as s:
        return store_jobs.get_config_text(s, key)


def job_attempts(db: Database, key: str) -> list[TaskAttempt]:
    """Every task attempt of the job, oldest first. Raises NoJobError."""
    with db.session() as s:
        return history.list_attempts(s, store_jobs.get_job(s, key).id)


def job_counts(db: Database, users: tuple[str, ...] | None) -> dict[JobState, int]:
    """How many jobs (of ``users``; None: everyone's) are in each state: one GROUP BY on an index."""
    with db.session() as s:
        return stats.count_by_state(s, users)


@dataclass(frozen=True, slots=True)
class VcQueue:
    total: int  # every waiting job of the VC
    jobs: list[Job]  # the first of them in queue order


def vc_queue(db: Database, clusters: ClusterCache, vc: str, limit: int) -> VcQueue:
    """The waiting jobs of ``vc`` in the order the scheduler would admit them (their waiting reasons' positions;
    those without one, held back or not yet looked at, last, oldest first): the first ``limit`` of them, whole.
    Raises NoVirtualClusterError."""
    with db.session() as s:
        if clusters.get(s).vc_status(vc) is None:
            raise NoVirtualClusterError(f"virtual cluster {vc} not found")
        waiting = stats.waiting_in(s, vc)
        first = sorted(waiting, key=lambda q: (q.position or math.inf, q.submitted_at))[:limit]
        by_id = {j.id: j for j in store_jobs.get_jobs_by_id(s, [q.job_id for q in first])}
    return VcQueue(len(waiting), [by_id[q.job_id] for q in first if q.job_id in by_id])
