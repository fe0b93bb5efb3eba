"""Fair sharing of borrowed capacity (Kueue's fair sharing, YARN's fair ordering), when the scheduler's
``fairSharing`` is enabled (docs/scheduling.md#fair-sharing).

A VC's **share** is the dominant resource share of what it borrows, divided by its weight::

    share(VC) = max over GPU, CPU, memory of  max(used - guaranteed, 0) / cluster total,  / weight

where ``used`` is what the VC will use once its jobs being stopped have exited. A VC that borrows nothing has
share 0; one of weight 0 that borrows has an infinite share. The denominator is the cluster, which a pass does not
change, so a VC's share moves only when its own usage does.

- **Order**: among jobs that borrow, the one whose VC would have the lowest share with it goes first (then
  priority, then age, as without fair sharing); oppo jobs still come after every other borrowing job.
- **Preemption** (rule ``fair-share``): a job that borrows (its VC ends above its guarantee), of priority 0 or more,
  may preempt a running job of another VC, as its VC's ``reclaim`` policy allows by priority, when the victim is
  borrowed work the job needs (the victim's VC borrows a resource the victim holds and the job asks for), the
  victim's VC keeps at least its guarantee of every resource it borrows once the victim is gone, and the strategy
  holds between the preemptor's VC's share with the job and the victim's VC's share: at most its share once the
  victim is gone (``LessThanOrEqualToFinalShare``), or less than its share before (``LessThanInitialShare``).
  The victim's VC's share counts the victims the search already chose.
"""

from __future__ import annotations

from pai.domain.resources import ZERO, Resources
from pai.vc.gang import Gang
from pai.vc.ledger import VcLedger
from pai.vc.order import always_borrows
from pai.vc.policy import FairShareStrategy, FairSharing, Reclaim
from pai.vc.search import Search
from pai.vc.snapshot import PendingJob, RunningJob, WaitingReason

INFINITE = float("inf")
NO_RANK = (False, 0.0)  # the queue rank of jobs that do not borrow, and of every job without fair sharing


def share(used: Resources, vc: VcLedger, total: Resources) -> float:
    """The VC's weighted dominant share of borrowed capacity were it to use ``used``."""
    g = vc.quota.guaranteed
    dominant = 0.0
    for have, mine, whole in ((used.gpu, g.gpu, total.gpu), (used.cpu, g.cpu, total.cpu),
                              (used.memory_mb, g.memory_mb, total.memory_mb)):
        if have > mine and whole > 0:
            dominant = max(dominant, (have - mine) / whole)
    if dominant == 0.0:
        return 0.0
    weight = vc.quota.weight
    return dominant / weight if weight > 0 else INFINITE


class FairShare:
    """The fair-sharing rules of one pass, over its VC ledgers and the cluster total."""

    def __init__(self, strategy: FairShareStrategy, total: Resources, vcs: dict[str, VcLedger]) -> None:
        self.strategy = strategy
        self.total = total
        self.vcs = vcs

    def rank(self, job: PendingJob, request: Resources, vc: VcLedger) -> tuple[bool, float]:
        """A borrowing job's place among borrowing jobs: others before oppo, then its VC's share with it."""
        return (always_borrows(job.priority), share(vc.settled + request, vc, self.total))

    def preemptor_share(self, job: PendingJob, gang: Gang, vc: VcLedger, reclaim_ok: bool) -> float | None:
        """The share the job's VC would have with it, when the rule may apply to the job (it borrows, it is not
        oppo, its VC may reclaim at all); else None. Its VC's own victims are not subtracted."""
        if reclaim_ok or always_borrows(job.priority) or vc.quota.preemption.reclaim is Reclaim.NEVER:
            return None
        return share(vc.settled + gang.request, vc, self.total)

    def allows(self, victim: RunningJob, s: Search, local: dict[str, Resources] | None) -> bool:
        """May the search's job preempt ``victim`` (of another VC, preemptible, not being stopped) by fair share?
        ``local``: victims picked tentatively besides the search's chosen ones, per VC."""
        mine = s.fair
        if mine is None or not s.vc.quota.preemption.reclaim.allows(victim.priority, s.job.priority):
            return False
        source = self.vcs.get(victim.vc)
        if source is None:
            return False
        gone = s.freed.get(victim.vc, ZERO)
        if local and victim.vc in local:
            gone = gone + local[victim.vc]
        before = source.settled - gone
        q, need, g = victim.request, s.gang.request, source.quota.guaranteed
        gives = False
        for have, held, needed, mine_g in ((before.gpu, q.gpu, need.gpu, g.gpu), (before.cpu, q.cpu, need.cpu, g.cpu),
                                           (before.memory_mb, q.memory_mb, need.memory_mb, g.memory_mb)):
            if have >= mine_g > have - held:  # never below its guarantee of a resource it uses that much of
                return False
            if have > mine_g:  # borrowed work the job needs: it holds some of a resource its VC borrows
                gives = gives or (held > 0 and needed > 0)
        if not gives:
            return False
        return self.strategy.allows(mine, share(before, source, self.total),
                                    share(before - q, source, self.total))

    def hint(self, reason: WaitingReason, vc: VcLedger, request: Resources) -> WaitingReason:
        """``reason`` (a borrowing job finds no room), with what fair sharing would let it take."""
        mine = share(vc.settled + request, vc, self.total)
        if vc.quota.preemption.reclaim is Reclaim.NEVER:
            clause = f"fair sharing takes nothing for it (VC `{vc.name}`'s reclaim policy is Never)"
        else:
            bound = ("at or above that once the work is gone" if self.strategy is
                     FairShareStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE else "above that")
            clause = (f"with it VC `{vc.name}` would have a fair share of {mine:.3g}; fair sharing takes borrowed work "
                      f"only from VCs whose share is {bound}")
        return WaitingReason(reason.code, f"{reason.message}; {clause}", reason.position,
                             {**reason.figures, "fairShare": mine})



def fair_share(config: FairSharing, total: Resources, vcs: dict[str, VcLedger]) -> FairShare | None:
    """The pass's fair-sharing rules; None when fair sharing is off (nothing is computed then)."""
    return FairShare(config.strategy, total, vcs) if config.enabled else None
