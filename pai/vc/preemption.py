"""Choosing victims for a job that does not fit: the rules, and the plans they allow.

Which running jobs a waiting job may preempt is decided by its VC's policies (``Planner.rule``); non-preemptible
jobs are never victims, and what they hold is never counted as capacity a preemption could free. Which of them it
does preempt is decided node by node (pai.vc.search). Once every task has a node, every victim that turns out not to
be needed is given back. A job preempts nothing unless the whole gang fits once its victims are gone.

Combined preemption: a job that would take its VC past its guarantee may first stop its VC's own lower-priority
work until it would not, and then reclaim from VCs that borrow, in the same plan; of that plan and the one
without reclaim, the cheaper wins (``Plan.cost``).
"""

from __future__ import annotations

from pai.domain.resources import ZERO, Resources
from pai.vc.capacity import NodePool
from pai.vc.fairshare import FairShare
from pai.vc.gang import Gang
from pai.vc.ledger import VcLedger
from pai.vc.order import always_borrows
from pai.vc.placement import Taken, hold, place, release
from pai.vc.policy import Reclaim, WithinVc
from pai.vc.search import (
    FAIR_SHARE,
    HINTS,
    IN_FLIGHT,
    RECLAIM,
    WHILE_BORROWING,
    WITHIN_VC,
    Hold,
    NodeSearch,
    Plan,
    Search,
    Victim,
    undo_holds,
)
from pai.vc.snapshot import PendingJob, RunningJob
from pai.vc.victims import VictimIndex

__all__ = ["FAIR_SHARE", "IN_FLIGHT", "RECLAIM", "WHILE_BORROWING", "WITHIN_VC", "Hold", "Plan", "Planner", "Victim",
           "undo_holds"]


class Planner(NodeSearch):
    """The rules and the plans they allow, over the running jobs of one pass."""

    def __init__(self, pool: NodePool, vcs: dict[str, VcLedger], index: VictimIndex, *, now: float,
                 min_run_seconds: float, fair: FairShare | None = None) -> None:
        super().__init__(pool, index)
        self.vcs = vcs
        self.fair = fair  # fair sharing's rules (None: off)
        self.now = now
        self.min_run_seconds = min_run_seconds
        self.refused_pinned = False  # did the last ``plan`` meet non-preemptible work it would otherwise take?

    def own_in_flight(self, job: str) -> list[RunningJob]:
        return [r for r in self.index.in_flight_for(job) if r.key not in self.claimed]

    # ---- rules ---------------------------------------------------------------------------------------------

    def rule(self, victim: RunningJob, s: Search, local: dict[str, Resources] | None = None) -> str | None:
        """Jobs being stopped for this job or for nobody waiting; else, none that is non-preemptible or younger
        than the minimum run time; of its own VC as ``withinVc`` allows; of another, as ``reclaim`` (or
        ``whileBorrowing``) allows, from a VC still above its guarantee (or oppo work); else by fair share where
        fair sharing is on (pai.vc.fairshare)."""
        job, vc = s.job, s.vc
        if victim.key == job.key:
            return None  # the placed tasks of a non-gang job whose other tasks wait (pai.vc.nongang)
        if victim.preempting:
            ok = victim.preempted_by == job.key or victim.preempted_by not in s.pending
            return IN_FLIGHT if ok else None
        if not s.allow_new or self.now - victim.started_at < self.min_run_seconds:
            return None
        if not (victim.preemptible or s.ignore_pinned):
            self.refused_pinned = True
            return None
        policy = vc.quota.preemption
        if victim.vc == s.own:
            ok = policy.within_vc.allows(victim.priority, victim.started_at, job.priority, job.submitted_at)
            return WITHIN_VC if ok else None
        if s.reclaim_ok:
            if not policy.reclaim.allows(victim.priority, job.priority):
                return None
        elif not policy.while_borrowing.allows(victim.priority, job.priority):
            fair = self.fair
            return FAIR_SHARE if fair is not None and fair.allows(victim, s, local) else None
        if not (always_borrows(victim.priority) or self._source(victim.vc, s, local)):
            return None
        return RECLAIM if s.reclaim_ok else WHILE_BORROWING

    def _source(self, vc: str, s: Search, local: dict[str, Resources] | None) -> bool:
        """Is the VC still above its guarantee (on a resource the gang needs), so that it may give back?"""
        ledger = self.vcs.get(vc)
        if ledger is None:
            return True
        if local and vc in local:
            return ledger.above_guarantee_on(s.gang.request, s.freed.get(vc, ZERO) + local[vc])
        above = s.sources.get(vc)
        if above is None:
            above = s.sources[vc] = ledger.above_guarantee_on(s.gang.request, s.freed.get(vc, ZERO))
        return above

    def may_preempt(self, vc: VcLedger, reclaim_ok: bool) -> bool:
        policy = vc.quota.preemption
        return policy.takes_others(reclaim_ok) or policy.within_vc is not WithinVc.NEVER

    # ---- the search ----------------------------------------------------------------------------------------

    def plan(self, job: PendingJob, gang: Gang, vc: VcLedger, pending: set[str]) -> Plan | None:
        """Victims that let the whole gang fit (VC max and nodes); None when no allowed set does.
        The pool is left as it was; ``commit`` applies a plan."""
        self.refused_pinned = False
        return self._plan(job, gang, vc, pending, ignore_pinned=False)

    def pinned_blockers(self, job: PendingJob, gang: Gang, vc: VcLedger, pending: set[str]) -> list[RunningJob]:
        """The non-preemptible jobs the job would preempt if they were preemptible (none: they are not what
        keeps it waiting)."""
        plan = self._plan(job, gang, vc, pending, ignore_pinned=True)
        return [] if plan is None else [v.job for v in plan.victims if not v.job.preemptible]

    def _plan(self, job: PendingJob, gang: Gang, vc: VcLedger, pending: set[str], *, ignore_pinned: bool
              ) -> Plan | None:
        reclaim_ok = not always_borrows(job.priority) and vc.within_guarantee(gang.request)
        own = self.own_in_flight(job.key)
        # a job already preempted for waits for those victims and preempts nothing more
        fair = None if self.fair is None else self.fair.preemptor_share(job, gang, vc, reclaim_ok)
        allow_new = not own and (self.may_preempt(vc, reclaim_ok) or fair is not None)
        if not allow_new and not own:
            return None  # nothing it may preempt, nothing being stopped for it
        # look first where jobs are being stopped: for this job, then for nobody
        index = self.pool.index
        flight = own if own else [r for r in self.index.in_flight_for_nobody(pending) if r.key not in self.claimed]
        hints = list(dict.fromkeys(index[n] for r in flight for _, n in r.tasks if n in index))[:HINTS]
        plain = Search(job, gang, vc, pending, reclaim_ok, allow_new, hints=hints, ignore_pinned=ignore_pinned,
                       fair=fair)
        if not (allow_new and not reclaim_ok and self._may_combine(job, gang, vc)):
            return self._search(plain)
        # Combined preemption may apply. A probe that allows the victims of both rules and keeps no guarantee finds
        # nodes whenever either plan would, so most jobs that wait are answered by one search, as before; where it
        # finds some, the combined search looks there first.
        probe = self._search(Search(job, gang, vc, pending, True, True, hints=hints, ignore_pinned=ignore_pinned,
                                     probe=True))
        if probe is None:
            return None
        best = self._search(plain)
        room = self._guarantee_room(Search(job, gang, vc, pending, True, True, ignore_pinned=ignore_pinned))
        if room:
            worst = room[-1][0]  # no combined plan does without a victim that ranks this high
            if best is None or best.cost(vc.name) > ((True, worst.priority, -worst.started_at), 1, 1):
                found = list(dict.fromkeys([*hints, *(t.node for t in probe.taken)]))
                combined = self._search(Search(job, gang, vc, pending, True, True, hints=found,
                                                ignore_pinned=ignore_pinned, room=room))
                if combined is not None and (best is None or combined.cost(vc.name) < best.cost(vc.name)):
                    best = combined
        return best

    def _search(self, s: Search) -> Plan | None:
        taken: list[Taken] = []
        for victim, rule in s.room:  # combined: the own victims that keep the job's VC within its guarantee
            self._choose(s, victim, rule)
        ok = self._make_quota_room(s) and self._find_nodes(s, taken)
        if ok and s.allow_new and not s.probe:  # victims being stopped for this job are its own: none to give back
            taken = self._prune(s, taken)
        release(self.pool, taken)
        for v in reversed(s.chosen):
            self._take(v)
        return Plan(s.chosen, taken) if ok and (s.chosen or s.probe) else None

    def _may_combine(self, job: PendingJob, gang: Gang, vc: VcLedger) -> bool:
        """May stopping its own VC's work bring the job within its VC's guarantee, and may it then reclaim from a
        VC that borrows (one above its guarantee on a resource the job needs, or one running oppo work)?"""
        policy = vc.quota.preemption
        if (always_borrows(job.priority) or policy.reclaim is Reclaim.NEVER or policy.within_vc is WithinVc.NEVER
                or not gang.request.fits_in(vc.guaranteed)):
            return False
        oppo = self.index.oppo
        return any(other is not vc and (other.above_guarantee_on(gang.request) or oppo.get(other.name, 0) > 0)
                   for other in self.vcs.values())

    def _guarantee_room(self, s: Search) -> list[tuple[RunningJob, str]]:
        """Combined: the VC's own victims, in victim order, until the job keeps its VC within its guarantee (only
        victims that give back a resource the VC would be over on); none when they cannot."""
        over = s.vc.over_guarantee(s.gang.request)
        g, c, m = over.gpu, over.cpu, over.memory_mb
        picked: list[tuple[RunningJob, str]] = []
        for r in self.index.by_vc(s.vc.name):
            q = r.request
            gives_back = (g > 0 and q.gpu > 0) or (c > 0 and q.cpu > 0) or (m > 0 and q.memory_mb > 0)
            rule = self.rule(r, s) if gives_back and r.key not in self.claimed else None
            if rule is not None:
                picked.append((r, rule))
                g, c, m = g - q.gpu, c - q.cpu, m - q.memory_mb
                if g <= 0 and c <= 0 and m <= 0:
                    return picked
        return []

    def _make_quota_room(self, s: Search) -> bool:
        """Within-VC victims, in order, until the gang fits under its VC's max."""
        vc, need = s.vc, s.gang.request
        if vc.fits_max_after(need):
            return True
        for r in self.index.by_vc(vc.name):
            if r.key in self.claimed:
                continue
            rule = self.rule(r, s)
            if rule is not None:
                self._choose(s, r, rule)
                if vc.fits_max_after(need, s.freed.get(vc.name, ZERO)):
                    return True
        return False

    def _prune(self, s: Search, taken: list[Taken]) -> list[Taken]:
        """Give back (in reverse order) every victim the gang and its VC's max can do without; while it reclaims,
        the own victims that keep its VC within its guarantee stay."""
        vc, need, gang = s.vc, s.gang.request, s.gang
        dropped: set[int] = set()
        reclaiming = sum(1 for v in s.chosen if v.rule == RECLAIM)
        for v in reversed(s.chosen):
            mine = v.job.vc == vc.name and v.rule != IN_FLIGHT
            after = s.freed.get(vc.name, ZERO) - (v.job.request if mine else ZERO)
            if not vc.fits_max_after(need, after) or (mine and reclaiming and not vc.within_guarantee(need, after)):
                continue
            if not {t.node for t in taken}.intersection(v.nodes):
                self._take(v)
            else:
                release(self.pool, taken)
                self._take(v)
                again = place(self.pool, gang, s.job.key, s.job.priority)
                if again is None:
                    self._give(v)
                    for t in taken:
                        hold(self.pool, t.need, t.node, gang.exclusive)
                    continue
                taken = again
            dropped.add(id(v))
            reclaiming -= v.rule == RECLAIM
            if v.rule != IN_FLIGHT:
                s.freed[v.job.vc] = s.freed[v.job.vc] - v.job.request
        s.chosen[:] = [v for v in s.chosen if id(v) not in dropped]
        return taken
