"""Queue order: within a VC by priority then submission time; across VCs, guaranteed work goes first."""

from __future__ import annotations

from pai.vc.snapshot import PendingJob, RunningJob


def queue_key(job: PendingJob) -> tuple[int, float, str]:
    """Higher priority first, then older first; the key breaks ties so the order is total."""
    return (-job.priority, job.submitted_at, job.key)


def victim_key(job: RunningJob, own_vc: str) -> tuple[bool, int, float, str]:
    """Victims of other VCs before one's own, lower priority first, most recently started first."""
    return (job.vc == own_vc, job.priority, -job.started_at, job.key)


def always_borrows(priority: int) -> bool:
    """Opportunistic jobs (priority below zero, OpenPAI's ``oppo``) always run on borrowed capacity."""
    return priority < 0
