"""One scheduling pass over a snapshot: admit, preempt, or explain why each pending job waits."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from pai.domain.resources import ZERO, Resources
from pai.vc.elastic import at_minimum, consider_elastic
from pai.vc.elastic_shrink import Shrinker, waiting_for_tasks
from pai.vc.explain import explain_no_fit
from pai.vc.fairshare import NO_RANK, fair_share
from pai.vc.gang import Gang
from pai.vc.ledger import VcLedger
from pai.vc.node_lending import place_borrowed, refuse_plan
from pai.vc.nongang import consider_tasks
from pai.vc.order import always_borrows, queue_key
from pai.vc.placement import Taken, place, release, to_admission
from pai.vc.policy import WithinVc
from pai.vc.preemption import Hold, Plan, Planner, undo_holds
from pai.vc.reasons import WaitCode, with_position
from pai.vc.reservation import reserve, unreserve
from pai.vc.shrink_index import is_piece
from pai.vc.snapshot import Admission, Decision, PendingJob, Preemption, Resize, RunningJob, WaitingReason
from pai.vc.state import State
from pai.vc.unblock import add_hints
from pai.vc.wording import (
    at_max,
    held_by_non_preemptible,
    lending_limited,
    preemption_message,
    user_limited,
    waiting_for_victims,
)

Memo = tuple[object, ...]


class Round:
    """The mutable state of one pass over ``state``; ``run`` returns the Decision. What the pass holds only for
    itself (planned placements, reservations) is listed in ``holds`` and ``reserved`` so it can be undone."""

    def __init__(self, state: State, pending: Iterable[PendingJob], now: float,
                 no_plan: dict[Memo, WaitingReason | None] | None = None,
                 known: dict[str, WaitingReason] | None = None, *, elastic: bool = False) -> None:
        self.state = state
        self.cfg = state.cfg
        self.now = now
        self._borrowing_vcs: set[str] | None = None  # computed on first use in a pass
        self._hints: dict[tuple[object, ...], WaitingReason] = {}  # worded reasons, by what they depend on
        self.pending = list(pending)
        self.pool = state.pool
        self.total = state.total
        self.vcs = state.vcs
        self.lenders = state.lenders
        self.fair = fair_share(self.cfg.fair_sharing, self.total, self.vcs)  # None: fair sharing is off
        self.planner = Planner(self.pool, self.vcs, state.index, now=now, min_run_seconds=self.cfg.min_run_seconds,
                               fair=self.fair)
        total = self.total.gpu if self.total.gpu > 0 else self.total.cpu
        self.budget = total * self.cfg.max_preemption_fraction if self.cfg.max_preemption_fraction < 1 else None
        self.preempted = 0  # GPUs (CPUs on a CPU-only cluster) preempted in this pass
        self.admissions: list[Admission] = []
        self.admitted: list[tuple[PendingJob, list[Taken]]] = []
        self.preemptions: list[Preemption] = []
        # elastic: shrink running elastic jobs before preempting whole ones (pai.vc.elastic_shrink)
        # (built at the pass's first victim search: a pass that searches for none never pays for it)
        self.shrinker: Shrinker | None = None
        self._shrinks = elastic and any(r.elastic for r in state.index.jobs.values())
        self.resizes: list[Resize] = []
        self.planned: dict[str, Admission] = {}
        self.planned_jobs: list[tuple[PendingJob, Resources]] = []  # with what each holds (a gang, or one task)
        self.holds: list[Hold] = []
        self.reasons: dict[str, WaitingReason] = {}
        # jobs known to wait (IncrementalScheduler, when nothing freed since): their reason stands
        self.known = known or {}
        self.reserved: dict[str, list[int]] = {}
        self.pending_keys = {j.key for j in self.pending}
        # Failures stay failures for the rest of the pass (capacity, victims and budget only shrink), so jobs
        # of the same shape and priority are answered from these memos.
        self._no_fit: dict[Memo, WaitingReason] = {}
        self._no_plan: dict[Memo, WaitingReason | None] = {}
        # searches that found no plan: did a rule refuse non-preemptible work? (if not, it is not what blocks them)
        self._refused_pinned: dict[Memo, bool] = {}
        self._blockers: dict[Memo, list[RunningJob]] = {}  # non-preemptible jobs a search would otherwise take
        # failed searches of earlier passes (IncrementalScheduler): read here, kept by the caller
        self.no_plan_kept: dict[Memo, WaitingReason | None] = {} if no_plan is None else no_plan

    def gang(self, job: PendingJob) -> Gang:
        return self.state.gang(job)

    # ---- the pass ------------------------------------------------------------------------------------------

    def run(self) -> Decision:
        queue = sorted(self.pending, key=queue_key)
        self._reserve_starving(queue)
        self._queues: dict[str, list[PendingJob]] = {}
        for job in queue:
            if job.vc in self.vcs:
                self._queues.setdefault(job.vc, []).append(job)
            else:
                self._wait(job, WaitCode.UNKNOWN_VC.reason(f"virtual cluster `{job.vc}` does not exist", vc=job.vc))
        self._next = dict.fromkeys(self._queues, 0)
        self._version = dict.fromkeys(self._queues, 0)
        self._heads: list[tuple[bool, tuple[bool, float], int, float, str, int, str]] = []
        for name in self._queues:
            self._push_head(name)
        while self._heads:
            borrowing, _, _, _, _, version, name = heapq.heappop(self._heads)
            if version != self._version[name]:
                continue  # stale: the VC's usage changed since this entry was pushed
            jobs = self._queues[name]
            job = jobs[self._next[name]]
            self._next[name] += 1
            vc = self.vcs[name]
            known = self.known.get(job.key)
            admitted = self._wait(job, known) if known is not None else self._consider(job, vc, borrowing=borrowing)
            if not admitted and vc.quota.strict_fifo:
                for later in jobs[self._next[name]:]:
                    self._wait_fifo(later)
                self._next[name] = len(jobs)
            self._push_head(name)
        waiting = self._positions(queue)
        if self.cfg.unblock_hints_per_vc > 0:  # what would unblock each, on what the pass leaves
            claimed = self.planner.claimed
            if self.resizes:  # jobs shrunk keep running: only whole jobs leave
                claimed = {k for k in claimed if not is_piece(k)} - {z.job for z in self.resizes}
            hinted = [at_minimum(j) or j if j.elastic and j.gang else j for j in queue]  # elastic: its minimum waits
            waiting = add_hints(self.state, hinted, waiting, now=self.now, claimed=claimed,
                                started=self.admitted, no_fit=self._no_fit.keys())
        return Decision(tuple(self.admissions), tuple(self.preemptions), waiting, dict(self.planned),
                        tuple(self.resizes))

    def _push_head(self, name: str) -> None:
        """Offer the VC's next job: across VCs, jobs within their VC's guarantee first, then (fair sharing) the
        lowest share of its VC with it, then priority, then age. A VC's share moves only with its own usage, when
        its head is offered anew: the order is exact."""
        self._version[name] += 1
        jobs = self._queues[name]
        k = self._next[name]
        if k < len(jobs):
            job = jobs[k]
            vc = self.vcs[name]
            borrows = self._borrows(job, vc)
            rank = self.fair.rank(job, self.gang(job).request, vc) if borrows and self.fair is not None else NO_RANK
            entry = (borrows, rank, -job.priority, job.submitted_at, job.key, self._version[name], name)
            heapq.heappush(self._heads, entry)

    def _borrows(self, job: PendingJob, vc: VcLedger) -> bool:
        return always_borrows(job.priority) or not vc.within_guarantee(self.gang(job).request)

    def _consider(self, job: PendingJob, vc: VcLedger, *, borrowing: bool) -> bool:
        """Admit the job, plan it behind preemptions, or record why it waits. True when admitted."""
        if not job.gang:
            return consider_tasks(self, job, vc)
        if job.elastic and (smaller := at_minimum(job)) is not None:  # its asked size now, else its minimum
            return consider_elastic(self, job, smaller, vc, borrowing=borrowing)
        gang = self.gang(job)
        request = gang.request
        if not vc.user_fits(job.user, request.gpu):
            return self._wait(job, user_limited(vc, job.user, request.gpu))
        never = self._never_fits(gang)
        if never is not None:
            return self._wait(job, never)
        if borrowing and not self._lending_ok(vc, request):
            return self._wait(job, lending_limited(vc, request, self.lenders))
        quota_ok = vc.fits_max_now(request)
        if quota_ok:
            lending = self.state.lending  # the per-node lending limit (None: off)
            taken = (self._place(job, gang) if lending is None or not borrowing
                     else place_borrowed(self, job, gang, lending))
            if isinstance(taken, WaitingReason):  # only the per-node lending limit keeps it out
                return self._wait(job, taken)
            if taken is not None:
                self._admit(job, vc, gang, taken)
                return True
        planned = self._preempt(job, gang, vc)
        if planned is not None:
            return self._wait(job, planned)
        reason = self._no_fit[(gang.key, job.priority)] if quota_ok else at_max(vc, request)
        if self.state.index.pinned:
            reason = self._pinned(job, gang, vc, reason)
        if not quota_ok:
            return self._wait(job, reason)
        if (borrowing and reason.code == WaitCode.NO_NODE_FITS.value and not always_borrows(job.priority)
                and self._others_borrow(vc)):
            memo_key = (id(reason), vc.name, vc.used, vc.leaving, request)  # reason: kept in _no_fit
            hinted = self._hints.get(memo_key)
            if hinted is None:
                hinted = _cannot_reclaim(reason, vc, request)
                if self.fair is not None:
                    hinted = self.fair.hint(hinted, vc, request)
                self._hints[memo_key] = hinted
            reason = hinted
        held = self.reserved.get(job.key)
        if held:
            names = [self.pool.names[i] for i in held]
            reason = WaitingReason(reason.code, f"{reason.message}; holding {', '.join(names)} for it",
                                   figures={**reason.figures, "reserved": names})
        return self._wait(job, reason)

    def _others_borrow(self, vc: VcLedger) -> bool:
        """Is a VC other than ``vc`` past its guarantee (as the pass began)? Only for wording a reason."""
        if self._borrowing_vcs is None:
            self._borrowing_vcs = {v.name for v in self.vcs.values() if not v.within_guarantee(ZERO)}
        return bool(self._borrowing_vcs - {vc.name})

    def _place_as(self, job: PendingJob, gang: Gang, borrowing: bool) -> list[Taken] | WaitingReason | None:
        """``_place``; a borrowing job where the per-node lending limit is set: only where it leaves room, or the
        ``LendingLimit`` reason when only that limit keeps it out (pai.vc.nongang; ``_consider`` inlines it)."""
        lending = self.state.lending
        if lending is None or not borrowing:
            return self._place(job, gang)
        return place_borrowed(self, job, gang, lending)

    def _place(self, job: PendingJob, gang: Gang) -> list[Taken] | None:
        memo = (gang.key, job.priority)
        owner = job.key in self.reserved
        if memo in self._no_fit and not owner:
            return None
        taken = place(self.pool, gang, job.key, job.priority)
        if taken is None and (owner or memo not in self._no_fit):
            self._no_fit[memo] = explain_no_fit(self.pool, gang, job.key, job.priority)
        return taken

    def _admit(self, job: PendingJob, vc: VcLedger, gang: Gang, taken: list[Taken]) -> None:
        vc.add(job.user, gang.request)
        self.state.used_all = self.state.used_all + gang.request
        self.admissions.append(to_admission(self.pool, job.key, taken))
        self.admitted.append((job, taken))
        self._drop_reservation(job.key)

    def _never_fits(self, gang: Gang) -> WaitingReason | None:
        return self.state.never_fits(gang)

    def _lending_ok(self, vc: VcLedger, request: Resources) -> bool:
        """Borrowing may not use idle guarantee that another VC does not lend (its lendingLimit)."""
        if not self.lenders:
            return True
        held_back = ZERO
        for v in self.lenders:
            if v is not vc:
                held_back = held_back + v.held_back()
        free = self.total - self.state.used_all - request
        return held_back.fits_in(free.clamp0()) and not free.is_negative()

    # ---- preemption and reservations -----------------------------------------------------------------------

    def _search_memo(self, job: PendingJob, gang: Gang, vc: VcLedger) -> Memo:
        """What a victim search depends on besides the pass's state: jobs alike in it share one search."""
        newer = job.submitted_at if vc.quota.preemption.within_vc is WithinVc.LOWER_OR_NEWER_EQUAL_PRIORITY else 0.0
        # a job holding a reservation may use its held nodes: its searches are its own
        return (vc.name, gang.key, job.priority, newer, job.key if job.key in self.reserved else "")

    def _preempt(self, job: PendingJob, gang: Gang, vc: VcLedger) -> WaitingReason | None:
        """Plan the job behind victims; the reason it then waits with, or None when no plan is allowed."""
        own = self.planner.own_in_flight(job.key)
        memo = self._search_memo(job, gang, vc)
        special = bool(own)
        if not special:
            if memo in self._no_plan:
                return self._no_plan[memo]
            if memo in self.no_plan_kept:
                return self.no_plan_kept[memo]
        # first a plan that only shrinks elastic jobs (pai.vc.elastic_shrink), then whole jobs as before
        if self._shrinks and self.shrinker is None:
            self.shrinker = Shrinker(self.state, self.pool, self.vcs, self.planner, now=self.now, fair=self.fair)
        plan = None if self.shrinker is None else self.shrinker.plan(job, gang, vc, self.pending_keys)
        if plan is not None and self.state.lending is not None and refuse_plan(self, job, gang, vc, plan) is not None:
            plan = None  # the per-node lending limit does not count a task's borrowed work: the usual search decides
        shrinks = plan is not None
        if plan is None:
            plan = self.planner.plan(job, gang, vc, self.pending_keys)
        refused = None if plan is None or self.state.lending is None else refuse_plan(self, job, gang, vc, plan)
        if refused is not None:  # its placement would put a node past the per-node lending limit
            if not special:
                self._no_plan[memo] = refused
            return refused
        if plan is None:
            result = waiting_for_victims(len(own), None) if own else None
            if not special:
                self._no_plan[memo] = result
                self._refused_pinned[memo] = self.planner.refused_pinned
            return result
        cost = sum(v.job.request.gpu if self.total.gpu > 0 else v.job.request.cpu for v in plan.new_victims)
        if self.budget is not None and plan.new_victims and self.preempted + cost > self.budget:
            result = WaitCode.PREEMPTION_DEFERRED.reason(
                f"needs to preempt {len(plan.new_victims)} jobs; this pass may preempt only "
                f"{max(self.budget - self.preempted, 0):g} more", victims=len(plan.new_victims))
            if not special:
                self._no_plan[memo] = result
            return result
        self._commit(job, gang, vc, plan, cost, shrinks=shrinks)
        if shrinks:
            return waiting_for_tasks(len(plan.new_victims), self.planned[job.key])
        return waiting_for_victims(len(plan.victims), self.planned[job.key])

    def _commit(self, job: PendingJob, gang: Gang, vc: VcLedger, plan: Plan, cost: int, *, shrinks: bool = False
                ) -> None:
        planner = self.shrinker if shrinks and self.shrinker is not None else self.planner
        self.holds.extend(planner.commit(plan, gang))
        self.preempted += cost
        vc.add(job.user, gang.request)
        self.state.used_all = self.state.used_all + gang.request
        self.planned_jobs.append((job, gang.request))
        for v in plan.new_victims:
            source = self.vcs.get(v.job.vc)
            if source is not None:
                source.mark_leaving(v.job.request)
                if source.name in self._queues and source is not vc:
                    self._push_head(source.name)  # its head may no longer borrow
            if not is_piece(v.job.key):  # a piece is one task of a shrinking elastic job: a Resize says it
                self.preemptions.append(Preemption(v.job.key, job.key, v.rule,
                                                   preemption_message(v.job, job, v.rule)))
        if shrinks and self.shrinker is not None:
            self.resizes.extend(self.shrinker.resizes(plan, job))
        self.planned[job.key] = to_admission(self.pool, job.key, plan.taken)
        self._drop_reservation(job.key)

    def _pinned(self, job: PendingJob, gang: Gang, vc: VcLedger, reason: WaitingReason) -> WaitingReason:
        """``reason``, or, when only non-preemptible work keeps the job from preempting its way in, a reason that
        says so and names that work."""
        memo = self._search_memo(job, gang, vc)
        if not self._refused_pinned.get(memo, True):  # unknown for searches of earlier passes: look
            return reason
        blockers = self._blockers.get(memo)
        if blockers is None:
            blockers = self._blockers[memo] = self.planner.pinned_blockers(job, gang, vc, self.pending_keys)
        return held_by_non_preemptible(reason, blockers) if blockers else reason

    def _reserve_starving(self, queue: list[PendingJob]) -> None:
        limit = self.cfg.max_reservations
        for job in queue:
            if len(self.reserved) >= limit:
                return
            if not job.gang:
                continue  # placed task by task: no node is held for all of it
            if self.now - job.submitted_at < self.cfg.reservation_after_seconds:
                continue
            vc = self.vcs.get(job.vc)
            gang = self.gang(at_minimum(job) or job if job.elastic else job)  # an elastic job holds for its minimum
            if vc is None or gang.request.gpu == 0 or not vc.fits_max_now(gang.request):
                continue
            if self._never_fits(gang) is not None:
                continue
            taken = place(self.pool, gang, job.key, job.priority)
            if taken is not None:
                release(self.pool, taken)
                continue
            held = reserve(self.pool, gang, job.key, job.priority)
            if held:
                self.reserved[job.key] = held

    def failed_searches(self) -> dict[Memo, WaitingReason | None]:
        """Victim searches of this pass that found no allowed plan, by (VC, shape, priority, newer)."""
        return dict(self._no_plan)

    def undo(self) -> None:
        """Give back what the pass held only for itself: planned placements, their VC usage, reservations."""
        undo_holds(self.pool, self.holds)
        self.holds = []
        for job, request in self.planned_jobs:
            self.vcs[job.vc].remove(job.user, request)
            self.state.used_all = self.state.used_all - request
        self.planned_jobs = []
        for key in list(self.reserved):
            unreserve(self.pool, key)
        self.reserved = {}

    def _drop_reservation(self, job: str) -> None:
        if self.reserved.pop(job, None) is not None and unreserve(self.pool, job):
            self._no_fit.clear()  # more capacity for the jobs behind: earlier failures may now fit
            self._no_plan.clear()

    # ---- reasons -------------------------------------------------------------------------------------------

    def _wait(self, job: PendingJob, reason: WaitingReason) -> bool:
        self.reasons[job.key] = reason
        return False

    def _wait_fifo(self, job: PendingJob) -> None:
        self._wait(job, WaitCode.STRICT_FIFO.reason(
            f"VC `{job.vc}` schedules in strict FIFO order and an earlier job is waiting", vc=job.vc))

    def _positions(self, queue: list[PendingJob]) -> dict[str, WaitingReason]:
        """Every waiting job with its 1-based position among the waiting jobs of its VC."""
        seen: dict[str, int] = {}
        out: dict[str, WaitingReason] = {}
        for job in queue:
            reason = self.reasons.get(job.key)
            if reason is None:
                continue
            seen[job.vc] = position = seen.get(job.vc, 0) + 1
            out[job.key] = reason if reason.position == position else with_position(reason, position)
        return out


def _cannot_reclaim(reason: WaitingReason, vc: VcLedger, request: Resources) -> WaitingReason:
    """Say why capacity other VCs borrowed is not taken back for this job: it would put its VC past its
    guarantee (reclaim only restores guarantees), on the resources named."""
    after = vc.settled + request
    g = vc.guaranteed
    over = [f"{name} {have}/{limit}" for name, have, limit in (
        ("GPU", after.gpu, g.gpu), ("CPU", after.cpu, g.cpu), ("MB", after.memory_mb, g.memory_mb)) if have > limit]
    message = (f"{reason.message}; VC `{vc.name}` would pass its guarantee ({', '.join(over)}), so capacity "
               "other VCs borrowed is not reclaimed for this job")
    return WaitingReason(reason.code, message, reason.position, {**reason.figures, "overGuarantee": over})
