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


class FairShareStrategy(StrEnum):
    """When may a borrowing job preempt borrowed work of another VC under fair sharing (pai.vc.fairshare)?
    Shares are weighted dominant shares of what a VC borrows (Kueue's DominantResourceShare)."""

    # the preemptor's VC, with the job, has at most the victim's VC's share once the victim is gone
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    # the preemptor's VC, with the job, has less than the victim's VC's share before the victim is gone
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"

    def allows(self, preemptor_after: float, victim_before: float, victim_after: float) -> bool:
        if self is FairShareStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
            return preemptor_after <= victim_after
        return preemptor_after < victim_before


@dataclass(frozen=True, slots=True)
class FairSharing:
    """Idle capacity lent out is shared between borrowing VCs by weight, and reclaim between borrowers follows
    it (docs/scheduling.md#fair-sharing). Off by default."""

    enabled: bool = False
    strategy: FairShareStrategy = FairShareStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE


@dataclass(frozen=True, slots=True)
class NodeLendingLimit:
    """``scheduler.nodeLendingLimit``: on any one node, work beyond its VC's guarantee (borrowed work) may hold at
    most this much (pai.vc.node_lending). Each amount is absolute (``4``) or a percent of the node (``"50%"``,
    of its usable GPUs, its CPUs, its memory); None: that resource is not limited."""

    gpu: int | str | None = None
    cpu: int | str | None = None
    memory_mb: int | str | None = None


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
    # Borrowing VCs share idle capacity by weight (VcQuota.weight); off: borrowers go by priority and age.
    fair_sharing: FairSharing = field(default_factory=FairSharing)
    # The first this many waiting jobs of each VC get a computed "what would unblock it" (pai.vc.unblock); 0: none.
    unblock_hints_per_vc: int = 10
    # Borrowed work may hold at most this much of any one node (pai.vc.node_lending); None: no per-node limit.
    node_lending_limit: NodeLendingLimit | None = None
    # An elastic job grows no sooner than this after its last resize (``scheduler.elastic.resizeIntervalSeconds``).
    resize_interval_seconds: float = 60.0


DEFAULT_POLICY = PreemptionPolicy()
DEFAULT_CONFIG = SchedulerConfig()
