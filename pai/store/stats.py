"""Figures about the cluster as a whole: samples of every VC's usage over time, how many jobs are in each state, and
a VC's queue.

Usage samples (``vc_usage_samples``, one row per VC per sample) are written by the launcher's loop and read a VC at a
time by its primary key ``(vc, at)``; old ones are pruned through the index on ``at``. Jobs are counted by state
with one ``GROUP BY`` on the ``state`` index (the ``(user_name, ...)`` index for one user's jobs): no row is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from pai.domain.resources import Resources
from pai.domain.states import JobState
from pai.store.schema import JobRow, VcUsageRow


@dataclass(frozen=True, slots=True)
class VcUsageSample:
    """A VC at one time: what its jobs held, its guarantee and maximum then, its running and waiting jobs."""

    vc: str
    at: float
    used: Resources
    guaranteed: Resources
    max: Resources
    running_jobs: int
    waiting_jobs: int


def _triple(prefix: str, r: Resources) -> dict[str, int]:
    return {f"{prefix}gpu": r.gpu, f"{prefix}cpu": r.cpu, f"{prefix}memory_mb": r.memory_mb}


def add_samples(s: Session, samples: Iterable[VcUsageSample]) -> None:
    rows = [{"vc": x.vc, "at": x.at, **_triple("", x.used), **_triple("guaranteed_", x.guaranteed),
             **_triple("max_", x.max), "running_jobs": x.running_jobs, "waiting_jobs": x.waiting_jobs}
            for x in samples]
    if rows:
        s.execute(insert(VcUsageRow), rows)


def prune_samples(s: Session, before: float) -> None:
    """Drop every sample taken before ``before``."""
    s.execute(delete(VcUsageRow).where(VcUsageRow.at < before))


def samples_of(s: Session, vc: str, since: float) -> list[VcUsageSample]:
    """The samples of ``vc`` taken at ``since`` or later, oldest first."""
    rows = s.scalars(select(VcUsageRow).where(VcUsageRow.vc == vc, VcUsageRow.at >= since).order_by(VcUsageRow.at))
    return [VcUsageSample(r.vc, r.at, Resources(r.gpu, r.cpu, r.memory_mb),
                          Resources(r.guaranteed_gpu, r.guaranteed_cpu, r.guaranteed_memory_mb),
                          Resources(r.max_gpu, r.max_cpu, r.max_memory_mb), r.running_jobs, r.waiting_jobs)
            for r in rows]


def count_by_state(s: Session, users: tuple[str, ...] | None = None) -> dict[JobState, int]:
    """How many jobs (of ``users``; None: of everyone) are in each state; every state is a key."""
    query = select(JobRow.state, func.count()).group_by(JobRow.state)
    if users is not None:
        query = query.where(JobRow.user_name.in_(users))
    counts = {state: 0 for state in JobState}
    for state, n in s.execute(query):
        counts[JobState(state)] = int(n)
    return counts


def count_by_state_and_vc(s: Session) -> dict[tuple[str, str], int]:
    """How many jobs each (state, VC) holds: one grouped count, for the metrics."""
    query = select(JobRow.state, JobRow.vc, func.count()).group_by(JobRow.state, JobRow.vc)
    return {(state, vc): int(n) for state, vc, n in s.execute(query).all()}


def oldest_waiting_by_vc(s: Session) -> dict[str, float]:
    """Each VC's earliest submission among its WAITING jobs (through the index on state and submission)."""
    query = select(JobRow.vc, func.min(JobRow.submitted_at)).where(JobRow.state == JobState.WAITING.value)
    return {vc: float(t) for vc, t in s.execute(query.group_by(JobRow.vc)).all()}


@dataclass(frozen=True, slots=True)
class Queued:
    """A waiting job of a VC: its id, submission time and waiting reason (None until a pass has looked at it)."""

    job_id: str
    submitted_at: float
    reason: dict[str, Any] | None

    @property
    def position(self) -> int:
        """Its 1-based place in the VC's queue; 0 when it has none (held back, or not yet seen by a pass)."""
        return int((self.reason or {}).get("position") or 0)


def waiting_in(s: Session, vc: str) -> list[Queued]:
    """Every WAITING job of ``vc`` (through the ``(state, ...)`` index), oldest submission first."""
    query = (select(JobRow.id, JobRow.submitted_at, JobRow.waiting_reason)
             .where(JobRow.state == JobState.WAITING.value, JobRow.vc == vc)
             .order_by(JobRow.submitted_at, JobRow.id))
    return [Queued(job_id, submitted_at, reason) for job_id, submitted_at, reason in s.execute(query)]
