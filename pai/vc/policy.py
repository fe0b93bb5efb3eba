"""Preemption policies of a VC and the scheduler-wide knobs (dampers, reservations, whole-node placement)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Reclaim(StrEnum):
    """May a VC below its guarantee take capacity back from VCs above theirs?"""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"

    def allows(self, victim_priority: int, preemptor_priority: int) -> bool:
        if self is Reclaim.NEVER:
            return False
        if self is Reclaim.LOWER_PRIORITY:
            return victim_priority < preemptor_priority
        return True


class WithinVc(StrEnum):
    """May a waiting job preempt running jobs of its own VC?"""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"

    def allows(self, victim_priority: int, victim_started_at: float, preemptor_priority: int,
               preemptor_submitted_at: float) -> bool:
        if self is WithinVc.NEVER:
            return False
        if victim_priority < preemptor_priority:
            return True
        return (self is WithinVc.LOWER_OR_NEWER_EQUAL_PRIORITY and victim_priority == preemptor_priority
                and victim_started_at > preemptor_submitted_at)


@dataclass(frozen=True, slots=True)
class WhileBorrowing:
    """Preempt other VCs' borrowed work even when the preemptor itself ends above its guarantee.

    Only victims of lower priority than the preemptor and at or below ``priority_threshold``.
    """

    enabled: bool = False
    priority_threshold: int = -1

    def allows(self, victim_priority: int, preemptor_priority: int) -> bool:
        return self.enabled and victim_priority < preemptor_priority and victim_priority <= self.priority_threshold


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    reclaim: Reclaim = Reclaim.ANY
    within_vc: WithinVc = WithinVc.LOWER_PRIORITY
    while_borrowing: WhileBorrowing = field(default_factory=WhileBorrowing)

    def takes_others(self, reclaim_ok: bool) -> bool:
        """May a job of this VC preempt other VCs' work at all: by reclaim where it may reclaim, else only while
        borrowing?"""
        return self.reclaim is not Reclaim.NEVER if reclaim_ok else self.while_borrowing.enabled


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Cluster-wide scheduling knobs; the defaults keep every damper off."""

    # At most this fraction of the cluster's GPUs (CPU for CPU-only clusters) may be preempted in one pass.
    max_preemption_fraction: float = 1.0
    # A running job may be preempted only after it ran this long (``now - started_at``).
    min_run_seconds: float = 0.0
    # A gang that waited this long holds the nodes it needs against smaller jobs of lower or equal priority.
    reservation_after_seconds: float = 1800.0
    # At most this many gangs hold reservations at once (the oldest first, in queue order).
    max_reservations: int = 4
    # Tasks of jobs with two or more GPU tasks take whole nodes (nothing else runs beside them).
    whole_nodes_for_multi_node_gpu: bool = False


DEFAULT_POLICY = PreemptionPolicy()
DEFAULT_CONFIG = SchedulerConfig()
