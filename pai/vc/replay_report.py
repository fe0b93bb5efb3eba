"""The figures of a replay: completion time and queueing delay per VC and overall, utilization, preemptions.

* **completion time** (JCT): completion minus submission, of the jobs that completed;
* **queueing delay**: first start minus submission, of the jobs that started (the Philly study's definition);
  time lost to preemption shows in the completion time, not here;
* **GPU utilization**: allocated GPU-time over the cluster's GPU-time, from the start of the replay to its end
  (the last completion, or ``until``), and over the arrival window alone (to the last arrival);
* **never ran**: jobs that never started, by the reason they last waited with;
* **resizes**: how often elastic jobs grew or shrank, by cause (``idle-capacity``, ``reclaim``, ``priority``,
  ``fair-share``); **GPU-hours lost to preemption**: the GPU-time of attempts preempted whole (their work is
  lost: they restart from scratch); a shrink loses none.

Percentiles are nearest-rank: p95 of 20 values is the 19th smallest. Jobs already running when a replay from a
live cluster begins count in utilization and preemptions only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pai.vc.replay_log import JobOutcome, ReplayLog


@dataclass(frozen=True, slots=True)
class Spread:
    """Mean and percentiles of a list of seconds (all 0 when there is none)."""

    count: int = 0
    mean: float = 0.0
    p50: float = 0.0
    p95: float = 0.0
    p99: float = 0.0

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        xs = sorted(values)
        if not xs:
            return cls()
        return cls(len(xs), sum(xs) / len(xs), percentile(xs, 0.50), percentile(xs, 0.95), percentile(xs, 0.99))

    def to_dict(self) -> dict[str, float]:
        return {"count": self.count, "mean": self.mean, "p50": self.p50, "p95": self.p95, "p99": self.p99}


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest rank of sorted values: the smallest value with at least ``q`` of them at or below it."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True, slots=True)
class Group:
    """The figures of one VC, or of the whole cluster."""

    name: str
    jobs: int
    completed: int
    never_ran: int
    preemptions: int
    completion: Spread
    queueing: Spread

    @classmethod
    def of(cls, name: str, jobs: Sequence[JobOutcome]) -> Group:
        counted = [j for j in jobs if not j.live]
        return cls(
            name=name,
            jobs=len(counted),
            completed=sum(1 for j in counted if j.completed_at is not None),
            never_ran=sum(1 for j in counted if j.started_at is None),
            preemptions=sum(j.preemptions for j in jobs),
            completion=Spread.of(j.completed_at - j.submitted_at for j in counted if j.completed_at is not None),
            queueing=Spread.of(j.started_at - j.submitted_at for j in counted if j.started_at is not None),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "completed": self.completed, "neverRan": self.never_ran,
                "preemptions": self.preemptions, "completionSeconds": self.completion.to_dict(),
                "queueingSeconds": self.queueing.to_dict()}


@dataclass(frozen=True, slots=True)
class Report:
    overall: Group
    vcs: tuple[Group, ...]
    span_seconds: float
    capacity_gpus: int
    gpu_hours: float
    lost_gpu_hours: float  # allocated to attempts that were preempted
    utilization: float  # over the whole span
    utilization_arrivals: float  # from the start to the last arrival
    never_ran: dict[str, int]  # reason code -> jobs
    passes: int
    full_passes: int
    resizes: dict[str, int]  # cause -> resizes of elastic jobs

    def to_dict(self) -> dict[str, Any]:
        return {
            "overall": self.overall.to_dict(),
            "vcs": {g.name: g.to_dict() for g in self.vcs},
            "spanSeconds": self.span_seconds,
            "capacityGpus": self.capacity_gpus,
            "gpuHours": self.gpu_hours,
            "lostGpuHours": self.lost_gpu_hours,
            "utilization": self.utilization,
            "utilizationArrivals": self.utilization_arrivals,
            "preemptions": self.overall.preemptions,
            "neverRan": self.never_ran,
            "passes": self.passes,
            "fullPasses": self.full_passes,
            "resizes": self.resizes,
        }


def report(log: ReplayLog) -> Report:
    by_vc: dict[str, list[JobOutcome]] = {name: [] for name in log.vcs}
    for j in log.jobs:
        by_vc.setdefault(j.vc, []).append(j)  # a job of a VC the configuration lacks gets a row of its own
    span = log.end - log.start
    arrivals = max((j.submitted_at for j in log.jobs if not j.live), default=log.start)
    return Report(
        overall=Group.of("overall", log.jobs),
        vcs=tuple(Group.of(name, jobs) for name, jobs in by_vc.items()),
        span_seconds=span,
        capacity_gpus=log.capacity_gpus,
        gpu_hours=log.gpu_seconds / 3600,
        lost_gpu_hours=log.lost_gpu_seconds / 3600,
        utilization=_share(log.gpu_seconds, log.capacity_gpus * span),
        utilization_arrivals=_share(_busy_until(log, arrivals), log.capacity_gpus * (arrivals - log.start)),
        never_ran=dict(Counter(j.reason for j in log.jobs if j.started_at is None and not j.live).most_common()),
        passes=log.passes,
        full_passes=log.full_passes,
        resizes=dict(log.resizes),
    )


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def _busy_until(log: ReplayLog, until: float) -> float:
    return sum(a.gpus * (min(a.end, until) - a.start) for a in log.attempts if a.start < until)
