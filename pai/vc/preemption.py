"""Choosing victims for a job that does not fit.

Which running jobs a waiting job may preempt is decided by its VC's policies (``rule``). Which of them it does
preempt is decided node by node: for each task that does not fit, the candidate nodes (emptiest first) are
priced by the victims each would need, taken in victim order (jobs already being stopped first, then other
VCs before one's own, lower priority first, most recently started first); the cheapest node wins (its worst
victim ranks lowest, then fewest victims). Once every task has a node, every victim that turns out not to be
needed is given back. A job preempts nothing unless the whole gang fits once its victims are gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

from pai.domain.resources import ZERO, Resources
from pai.vc.capacity import NodePool
from pai.vc.gang import Gang, Need
from pai.vc.ledger import VcLedger
from pai.vc.order import always_borrows
from pai.vc.placement import Taken, hold, place, release
from pai.vc.policy import Reclaim, WithinVc
from pai.vc.snapshot import PendingJob, RunningJob
from pai.vc.victims import OnNode, VictimIndex

IN_FLIGHT = "in-flight"  # a job already being stopped: no new preemption, its capacity is claimed
RECLAIM = "reclaim"
WHILE_BORROWING = "while-borrowing"
WITHIN_VC = "within-vc"
EXAMINE_NODES = 128  # nodes looked at per task before giving up (keeps a decision in milliseconds)
ENOUGH_CHOICES = 4  # feasible nodes priced per task before the cheapest is taken
HINTS = 64  # nodes of jobs being stopped looked at first
Hold = tuple[int, int, int, int, int, bool]  # node, gpu, cpu, memory, ports held; node closed


@dataclass(slots=True, eq=False)
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


@dataclass(slots=True)
class _Search:
    """The state of one victim search."""

    job: PendingJob
    gang: Gang
    vc: VcLedger
    pending: set[str]
    reclaim_ok: bool
    allow_new: bool
    chosen: list[Victim] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    freed: dict[str, Resources] = field(default_factory=dict)
    sources: dict[str, bool] = field(default_factory=dict)  # VC -> above its guarantee, given ``freed``
    dead: dict[object, set[int]] = field(default_factory=dict)  # need kind -> nodes with too few allowed victims
    hints: list[int] = field(default_factory=list)  # nodes of the jobs already being stopped for this job


class Planner:
    """Victim search over the running jobs of one pass; ``claimed`` grows as plans are committed."""

    def __init__(self, pool: NodePool, vcs: dict[str, VcLedger], index: VictimIndex, *, now: float,
                 min_run_seconds: float) -> None:
        self.pool = pool
        self.vcs = vcs
        self.index = index
        self.now = now
        self.min_run_seconds = min_run_seconds
        self.claimed: set[str] = set()

    def own_in_flight(self, job: str) -> list[RunningJob]:
        return [r for r in self.index.in_flight_for(job) if r.key not in self.claimed]

    # ---- rules ---------------------------------------------------------------------------------------------

    def rule(self, victim: RunningJob, s: _Search, local: dict[str, Resources] | None = None) -> str | None:
        """The rule that lets the search's job preempt ``victim`` now, or None. ``local``: victims picked
        tentatively besides the search's chosen ones, per VC."""
        job, vc = s.job, s.vc
        if victim.preempting:
            ok = victim.preempted_by == job.key or victim.preempted_by not in s.pending
            return IN_FLIGHT if ok else None
        if not s.allow_new or self.now - victim.started_at < self.min_run_seconds:
            return None
        policy = vc.quota.preemption
        if victim.vc == vc.name:
            ok = policy.within_vc.allows(victim.priority, victim.started_at, job.priority, job.submitted_at)
            return WITHIN_VC if ok else None
        if s.reclaim_ok:
            if not policy.reclaim.allows(victim.priority, job.priority):
                return None
        elif not policy.while_borrowing.allows(victim.priority, job.priority):
            return None
        if not (always_borrows(victim.priority) or self._source(victim.vc, s, local)):
            return None
        return RECLAIM if s.reclaim_ok else WHILE_BORROWING

    def _source(self, vc: str, s: _Search, local: dict[str, Resources] | None) -> bool:
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
        others = policy.reclaim is not Reclaim.NEVER if reclaim_ok else policy.while_borrowing.enabled
        return others or policy.within_vc is not WithinVc.NEVER

    # ---- the search ----------------------------------------------------------------------------------------

    def plan(self, job: PendingJob, gang: Gang, vc: VcLedger, pending: set[str]) -> Plan | None:
        """Victims that let the whole gang fit (VC max and nodes); None when no allowed set does.
        The pool is left as it was; ``commit`` applies a plan."""
        reclaim_ok = not always_borrows(job.priority) and vc.within_guarantee(gang.request)
        # a job already preempted for waits for those victims and preempts nothing more
        allow_new = not self.own_in_flight(job.key) and self.may_preempt(vc, reclaim_ok)
        s = _Search(job, gang, vc, pending, reclaim_ok, allow_new)
        index = self.pool.index
        own = self.own_in_flight(job.key)
        if not allow_new and not own:
            return None  # nothing it may preempt, nothing being stopped for it
        # look first where jobs are being stopped: for this job, then for nobody
        flight = own if own else [r for r in self.index.in_flight_for_nobody(pending) if r.key not in self.claimed]
        s.hints = list(dict.fromkeys(index[n] for r in flight for _, n in r.tasks if n in index))[:HINTS]
        taken: list[Taken] = []
        ok = self._make_quota_room(s) and self._find_nodes(s, taken)
        if ok and allow_new:  # victims already being stopped for this job are its own: nothing to give back
            taken = self._prune(s, taken)
        release(self.pool, taken)
        for v in reversed(s.chosen):
            self._take(v)
        return Plan(s.chosen, taken) if ok and s.chosen else None

    def _choose(self, s: _Search, victim: RunningJob, rule: str) -> None:
        v = Victim(victim, rule)
        self._give(v)
        s.chosen.append(v)
        s.keys.add(victim.key)
        if rule != IN_FLIGHT:
            s.freed[victim.vc] = s.freed.get(victim.vc, ZERO) + victim.request
            s.sources.pop(victim.vc, None)

    def _make_quota_room(self, s: _Search) -> bool:
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

    def _find_nodes(self, s: _Search, taken: list[Taken]) -> bool:
        """A node for every task, freeing the cheapest victims where a task does not fit as things are."""
        pool = self.pool
        for need in s.gang.needs:
            i = pool.best_fit(need, s.job.key, s.job.priority, exclusive=s.gang.exclusive)
            if i is None:
                best = self._cheapest_node(s, need)
                if best is None:
                    return False
                i, victims = best
                for victim, rule in victims:
                    self._choose(s, victim, rule)
            hold(pool, need, i, s.gang.exclusive)
            taken.append(Taken(need, i))
        return True

    def _cheapest_node(self, s: _Search, need: Need) -> tuple[int, list[tuple[RunningJob, str]]] | None:
        pool = self.pool
        best: tuple[tuple[object, ...], int, list[tuple[RunningJob, str]]] | None = None
        feasible = 0
        dead = s.dead.setdefault(need.kind, set())
        # a job that may preempt nothing new only looks where its own victims are being stopped
        nodes = chain(s.hints, pool.emptiest(need.gpu_type)) if s.allow_new else iter(s.hints)
        for examined, i in enumerate(nodes):
            if examined >= EXAMINE_NODES or feasible >= ENOUGH_CHOICES:
                break
            if (i in dead or not pool.open[i] or (need.gpu_type is not None and pool.gpu_type[i] != need.gpu_type)
                    or pool.total_gpu[i] < need.gpu or pool.total_cpu[i] < need.cpu
                    or pool.total_mem[i] < need.mem or (need.selector and not pool.matches(i, None, need.selector))
                    or (pool.held and self._held(i, s))):
                continue
            picked = self._victims_on(i, s, need)
            if picked is None:
                dead.add(i)  # victims only get scarcer as the search goes on
                continue
            feasible += 1
            new = [r for r, rule in picked if rule != IN_FLIGHT]
            worst = max(((r.vc == s.vc.name, r.priority, -r.started_at) for r in new), default=(False, -(2**62), 0.0))
            cost = (worst, len(new), len(picked), examined)
            if best is None or cost < best[0]:
                best = (cost, i, picked)
            if not new:
                break  # jobs already being stopped make room: nothing cheaper
        return None if best is None else (best[1], best[2])

    def _held(self, i: int, s: _Search) -> bool:
        held = self.pool.held.get(i)
        return held is not None and held[0] != s.job.key and s.job.priority <= held[1]

    def _victims_on(self, i: int, s: _Search, need: Need) -> list[tuple[RunningJob, str]] | None:
        """Victims on node ``i``, in order, until ``need`` fits there (and the node is idle for whole-node
        gangs); None when the allowed victims are not enough."""
        pool = self.pool
        g, c, m, p = pool.free_gpu[i], pool.free_cpu[i], pool.free_mem[i], pool.free_ports[i]
        tasks = pool.tasks_on[i]
        rest = pool.total_gpu[i] - g  # GPUs the node's other jobs hold: all that freeing could add
        exclusive = s.gang.exclusive
        local: dict[str, Resources] = {}
        picked: list[tuple[RunningJob, str]] = []
        own = s.vc.name
        later: list[OnNode] = []
        done = False
        for phase in (self.index.on_node(i), later):  # other VCs' jobs (and jobs being stopped) first
            for entry in phase:
                r, jg, jc, jm, jt = entry
                if phase is not later and r.vc == own and not r.preempting:
                    later.append(entry)
                    continue
                if g >= need.gpu and c >= need.cpu and m >= need.mem and p >= need.ports and not (exclusive and tasks):
                    done = True
                    break
                rest -= jg
                if r.key in s.keys or r.key in self.claimed:
                    continue
                rule = self.rule(r, s, local)
                if rule is None:
                    if exclusive or g + rest < need.gpu:
                        return None  # what is left on the node cannot make room
                    continue
                picked.append((r, rule))
                if rule != IN_FLIGHT:
                    local[r.vc] = local.get(r.vc, ZERO) + r.request
                g, c, m, tasks = g + jg, c + jc, m + jm, tasks - jt
            if done:
                break
        fits = g >= need.gpu and c >= need.cpu and m >= need.mem and p >= need.ports
        if exclusive:
            fits = fits and tasks == 0 and g == pool.total_gpu[i] and c == pool.total_cpu[i]
        return picked if fits and picked else None

    def _prune(self, s: _Search, taken: list[Taken]) -> list[Taken]:
        """Give back (in reverse order) every victim the gang and its VC's max can do without."""
        vc, need, gang = s.vc, s.gang.request, s.gang
        dropped: set[int] = set()
        for v in reversed(s.chosen):
            mine = v.job.vc == vc.name and v.rule != IN_FLIGHT
            if not vc.fits_max_after(need, s.freed.get(vc.name, ZERO) - (v.job.request if mine else ZERO)):
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
            if v.rule != IN_FLIGHT:
                s.freed[v.job.vc] = s.freed[v.job.vc] - v.job.request
        s.chosen[:] = [v for v in s.chosen if id(v) not in dropped]
        return taken

    def _give(self, v: Victim) -> None:
        """Free the victim's tasks in the pool."""
        pool = self.pool
        v.nodes = []
        for task, node in v.job.tasks:
            i = pool.index.get(node)
            if i is not None:
                r = task.resources
                pool.give(i, r.gpu, r.cpu, r.memory_mb, 0)
                v.nodes.append(i)

    def _take(self, v: Victim) -> None:
        pool = self.pool
        for task, node in v.job.tasks:
            i = pool.index.get(node)
            if i is not None:
                r = task.resources
                pool.take(i, r.gpu, r.cpu, r.memory_mb, 0)

    def commit(self, plan: Plan, gang: Gang) -> list[Hold]:
        """Hold the plan's placement on the pool: the gang uses its victims' capacity first, then free capacity;
        what is left of the victims stays in use until they exit. Returns what was held, to undo it later."""
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
        holds: list[Hold] = []
        # per_node = victims - gang; the gang takes from free capacity only what its victims do not cover
        for i, (g, c, m) in per_node.items():
            holds.append((i, max(-g, 0), max(-c, 0), max(-m, 0), 0, False))
        for t in plan.taken:
            holds.append((t.node, 0, 0, 0, t.need.ports, gang.exclusive and pool.open[t.node]))
        for i, g, c, m, p, close in holds:
            pool.take(i, g, c, m, p, 0)
            if close:
                pool.close(i)
        return holds


def undo_holds(pool: NodePool, holds: list[Hold]) -> None:
    for i, g, c, m, p, closed in reversed(holds):
        pool.give(i, g, c, m, p, 0)
        if closed:
            pool.reopen(i)
