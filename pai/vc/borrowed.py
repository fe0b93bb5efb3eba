"""Which running jobs run on borrowed capacity: the one rule, a pure function of a VC's running jobs.

A VC's running jobs that are not being stopped, taken in reverse victim order (pai.vc.victims.victim_order: the
jobs least likely to be preempted first: highest priority, then longest running), fill its guarantee; the first
job that does not fit (on any resource) and every job after it are borrowed. Jobs being stopped are leaving:
never borrowed. Work of negative priority (``oppo``) always borrows (pai.vc.order.always_borrows) and fills
nothing. A VC within its guarantee with no ``oppo`` work borrows nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from pai.domain.resources import ZERO, Resources
from pai.vc.order import always_borrows
from pai.vc.snapshot import RunningJob
from pai.vc.victims import victim_order


def borrowed_jobs(jobs: Iterable[RunningJob], guaranteed: Resources) -> list[RunningJob]:
    """The jobs of one VC (``jobs``: all of them, in any order) that run beyond its ``guaranteed``, in reverse
    victim order."""
    ordered = sorted((j for j in jobs if not j.preempting), key=victim_order, reverse=True)
    return borrowed_in_order(ordered, guaranteed)


def borrowed_in_order(ordered: Iterable[RunningJob], guaranteed: Resources) -> list[RunningJob]:
    """As ``borrowed_jobs``, for jobs already in reverse victim order and none being stopped."""
    out: list[RunningJob] = []
    filled = ZERO
    full = False
    for job in ordered:
        if always_borrows(job.priority):
            out.append(job)
            continue
        if not full:
            after = filled + job.request
            if after.fits_in(guaranteed):
                filled = after
                continue
            full = True
        out.append(job)
    return out
