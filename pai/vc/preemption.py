"""Choosing victims: add allowed victims in order until the gang fits on real nodes, then give back every victim
that is not needed. Victims: jobs already being stopped first, then other VCs before one's own, lower priority
first, most recently started first."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pai.domain.resources import ZERO, Resources
from pai.vc.capacity import NodePool
from pai.vc.gang import Gang
from pai.vc.ledger import VcLedger
from pai.vc.order import always_borrows
from pai.vc.placement import Taken, hold, place, release
from pai.vc.policy import Reclaim, WithinVc
from pai.vc.snapshot import PendingJob, RunningJob

IN_FLIGHT = "in-flight"  # a job already being stopped: no new preemption, its capacity is claimed
RECLAIM = "reclaim"
WHILE_BORROWING = "while-borrowing"
WITHIN_VC = "within-vc"


def victim_order(job: RunningJob) -> tuple[int, float, str]:
    """Lower priority first, then most recently started first."""
    return (job.priority, -job.started_at, job.key)


@dataclass(slots=True)
class Victim:
    job: RunningJob
    rule: str
    nodes: list[int] = field(default_factory=list)


@dataclass(slots=True)
class Plan:
    victims: list[Victim]
    taken: list[Taken]

    @property
    def new_victims(self) -> list[Victim]:
        return [v for v in self.victims if v.rule != IN_FLIGHT]


class Planner:
    """Victim search over the running jobs of one pass; ``claimed`` grows as plans are committed."""

    def __init__(self, pool: NodePool, vcs: dict[str, VcLedger], running: Iterable[RunningJob], *, now: float,
                 min_run_seconds: float) -> None:
        self.pool = pool
        self.vcs = vcs
        self.now = now
        self.min_run_seconds = min_run_seconds
        self.claimed: set[str] = set()
        self.in_flight: list[RunningJob] = []
        self.by_vc: dict[str, list[RunningJob]] = {}
        for r in sorted(running, key=victim_order):
            if r.preempting:
                self.in_flight.append(r)
            else:
                self.by_vc.setdefault(r.vc, []).append(r)

    # ---- candidates ----------------------------------------------------------------------------------------

    def own_in_flight(self, job: str) -> list[RunningJob]:
        return [r for r in self.in_flight if r.preempted_by == job and r.key not in self.claimed]

    def _free_in_flight(self, pending: set[str]) -> list[RunningJob]:
        """Jobs being stopped for nobody who still waits: their capacity goes to the first taker."""
        return [r for r in self.in_flight if r.key not in self.claimed and r.preempted_by not in pending]

    def _others(self, vc: str, need: Resources) -> Iterator[RunningJob]:
        """Running jobs of other VCs that may be borrowing, merged in victim order."""
        lists = []
        for name, jobs in self.by_vc.items():
            if name == vc:
                continue
            ledger = self.vcs.get(name)
            if ledger is None or ledger.above_guarantee_on(need) or always_borrows(jobs[0].priority):
                lists.append(jobs)
        return heapq.merge(*lists, key=victim_order) if len(lists) != 1 else iter(lists[0])

    def rule(self, victim: RunningJob, job: PendingJob, vc: VcLedger, need: Resources, reclaim_ok: bool,
             freed: dict[str, Resources]) -> str | None:
        """The rule that lets ``job`` preempt ``victim`` now, or None."""
        if victim.key in self.claimed or self.now - victim.started_at < self.min_run_seconds:
            return None
        policy = vc.quota.preemption
        if victim.vc == vc.name:
            ok = policy.within_vc.allows(victim.priority, victim.started_at, job.priority, job.submitted_at)
            return WITHIN_VC if ok else None
        source = self.vcs.get(victim.vc)
        borrowed = (always_borrows(victim.priority) or source is None
                    or source.above_guarantee_on(need, freed.get(victim.vc, ZERO)))
        if not borrowed:
            return None
        if reclaim_ok:
            return RECLAIM if policy.reclaim.allows(victim.priority, job.priority) else None
        return WHILE_BORROWING if policy.while_borrowing.allows(victim.priority, job.priority) else None

    # ---- the search ----------------------------------------------------------------------------------------

    def plan(self, job: PendingJob, gang: Gang, vc: VcLedger, pending: set[str]) -> Plan | None:
        """Victims that let the gang fit (quota and nodes), fewest needed; None when no allowed set does.

        The pool is left as it was; ``commit`` applies a plan."""
        need = gang.request
        own = self.own_in_flight(job.key)
        reclaim_ok = not always_borrows(job.priority) and vc.within_guarantee(need)
        policy = vc.quota.preemption
        candidates: Iterable[tuple[RunningJob, str | None]]
        flight = [(r, IN_FLIGHT) for r in own + self._free_in_flight(pending)]
        if own:
            candidates = flight  # already preempted for: wait for those, preempt nothing more
        else:
            others: Iterable[RunningJob] = ()
            if policy.reclaim is not Reclaim.NEVER if reclaim_ok else policy.while_borrowing.enabled:
                others = self._others(vc.name, need)
            mine: Iterable[RunningJob] = self.by_vc.get(vc.name, ()) if policy.within_vc is not WithinVc.NEVER else ()
            candidates = _chain(flight, ((r, None) for r in others), ((r, None) for r in mine))
        return self._search(job, gang, vc, need, reclaim_ok, candidates)

    def _search(self, job: PendingJob, gang: Gang, vc: VcLedger, need: Resources, reclaim_ok: bool,
                candidates: Iterable[tuple[RunningJob, str | None]]) -> Plan | None:
        pool = self.pool
        freed: dict[str, Resources] = {}
        chosen: list[Victim] = []
        min_gpu = min((n.gpu for n in gang.needs), default=0)
        taken: list[Taken] | None = None
        for victim, fixed in candidates:
            rule = fixed or self.rule(victim, job, vc, need, reclaim_ok, freed)
            if rule is None:
                continue
            v = Victim(victim, rule)
            helps = self._give(v, min_gpu)
            chosen.append(v)
            if rule != IN_FLIGHT:
                freed[victim.vc] = freed.get(victim.vc, ZERO) + victim.request
            if (helps or victim.vc == vc.name) and vc.fits_max_after(need, freed.get(vc.name, ZERO)):
                taken = place(pool, gang, job.key, job.priority)
                if taken is not None:
                    break
        if taken is None:
            for v in reversed(chosen):
                self._take(v)
            return None
        taken = self._prune(job, gang, vc, need, chosen, freed, taken)
        release(pool, taken)
        for v in reversed(chosen):
            self._take(v)
        return Plan(chosen, taken)

    def _prune(self, job: PendingJob, gang: Gang, vc: VcLedger, need: Resources, chosen: list[Victim],
               freed: dict[str, Resources], taken: list[Taken]) -> list[Taken]:
        """Give back (in reverse order) every victim the gang and its VC's max can do without."""
        for v in list(reversed(chosen)):
            mine = v.job.vc == vc.name and v.rule != IN_FLIGHT
            vc_freed = freed.get(vc.name, ZERO) - (v.job.request if mine else ZERO)
            if not vc.fits_max_after(need, vc_freed):
                continue
            used = {t.node for t in taken}
            if not used.intersection(v.nodes):
                self._take(v)
            else:
                release(self.pool, taken)
                self._take(v)
                again = place(self.pool, gang, job.key, job.priority)
                if again is None:
                    self._give(v, 0)
                    for t in taken:
                        hold(self.pool, t.need, t.node, gang.exclusive)
                    continue
                taken = again
            chosen.remove(v)
            if v.rule != IN_FLIGHT:
                freed[v.job.vc] = freed[v.job.vc] - v.job.request
        return taken

    def _give(self, v: Victim, min_gpu: int) -> bool:
        """Free the victim's tasks in the pool; True when a node it frees could now take the gang's smallest task."""
        pool = self.pool
        helps = False
        v.nodes = []
        for task, node in v.job.tasks:
            i = pool.index.get(node)
            if i is None:
                continue
            r = task.resources
            pool.give(i, r.gpu, r.cpu, r.memory_mb, 0)
            v.nodes.append(i)
            helps = helps or (pool.open[i] and pool.free_gpu[i] >= min_gpu)
        return helps

    def _take(self, v: Victim) -> None:
        pool = self.pool
        for task, node in v.job.tasks:
            i = pool.index.get(node)
            if i is not None:
                r = task.resources
                pool.take(i, r.gpu, r.cpu, r.memory_mb, 0)

    def commit(self, plan: Plan, gang: Gang) -> None:
        """Hold the plan's placement on the pool: the gang uses its victims' capacity first, then free capacity;
        what is left of the victims stays in use until they exit."""
        pool = self.pool
        per_node: dict[int, list[int]] = {}
        for v in plan.victims:
            self.claimed.add(v.job.key)
            for task, node in v.job.tasks:
                i = pool.index.get(node)
                if i is not None:
                    acc = per_node.setdefault(i, [0, 0, 0])
                    acc[0] += task.resources.gpu
                    acc[1] += task.resources.cpu
                    acc[2] += task.resources.memory_mb
        for t in plan.taken:
            acc = per_node.setdefault(t.node, [0, 0, 0])
            acc[0] -= t.need.gpu
            acc[1] -= t.need.cpu
            acc[2] -= t.need.mem
        # per_node = victims - gang; the gang takes from free capacity only what its victims do not cover
        for i, (g, c, m) in per_node.items():
            pool.take(i, max(-g, 0), max(-c, 0), max(-m, 0), 0, 0)
        for t in plan.taken:
            pool.take(t.node, 0, 0, 0, t.need.ports)
            if gang.exclusive:
                pool.close(t.node)


def _chain(*parts: Iterable[tuple[RunningJob, str | None]]) -> Iterator[tuple[RunningJob, str | None]]:
    for part in parts:
        yield from part
