"""Victim search on the nodes: for each task that does not fit, the candidate nodes (emptiest first) are priced
by the victims each would need, taken in victim order (jobs already being stopped first, then other VCs' jobs
before one's own, lower priority first, most recently started first); the cheapest node wins (its worst victim
ranks lowest, then fewest victims). Which jobs may be victims is the rules' business (``NodeSearch.rule``, given by
pai.vc.preemption); what a node's jobs that may not be taken hold is never counted as room.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain, zip_longest

from pai.domain.resources import ZERO, Resources
from pai.vc.capacity import NodePool
from pai.vc.gang import Gang, Need
from pai.vc.ledger import VcLedger
from pai.vc.placement import Taken, hold
from pai.vc.snapshot import PendingJob, RunningJob
from pai.vc.victims import OnNode, VictimIndex

IN_FLIGHT = "in-flight"  # a job already being stopped: no new preemption, its capacity is claimed
RECLAIM = "reclaim"
WHILE_BORROWING = "while-borrowing"
WITHIN_VC = "within-vc"
FAIR_SHARE = "fair-share"  # a borrower takes borrowed work of a VC with a higher share (pai.vc.fairshare)
EXAMINE_NODES = 128  # nodes looked at per task before giving up (keeps a decision in milliseconds)
ENOUGH_CHOICES = 4  # feasible nodes priced per task before the cheapest is taken
HINTS = 64  # nodes of jobs being stopped looked at first
Hold = tuple[int, int, int, int, int, bool]  # node, gpu, cpu, memory, ports held; node closed


@dataclass(slots=True, eq=False)
class Victim:
    job: RunningJob
    rule: str
    nodes: list[int] = field(default_factory=list)
    whole: bool = False  # it held whole nodes: freeing it opens them


@dataclass(slots=True)
class Plan:
    victims: list[Victim]
    taken: list[Taken]

    @property
    def new_victims(self) -> list[Victim]:
        return [v for v in self.victims if v.rule != IN_FLIGHT]

    def cost(self, own_vc: str) -> tuple[object, ...]:
        """Its worst new victim's rank (another VC's before one's own, lower priority, most recently started),
        then how many new victims, then how many in all: the lower, the cheaper."""
        new = [v.job for v in self.new_victims]
        worst = max(((r.vc == own_vc, r.priority, -r.started_at) for r in new), default=(False, -(2**62), 0.0))
        return (worst, len(new), len(self.victims))


@dataclass(slots=True)
class Search:
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
    ignore_pinned: bool = False  # as if non-preemptible jobs were not: what would the job take?
    room: list[tuple[RunningJob, str]] = field(default_factory=list)  # combined: own victims chosen first
    probe: bool = False  # is there room at all? (the first feasible node per task; no pruning)
    fair: float | None = None  # fair sharing: the share of the job's VC with the job, where the rule applies to it
    own: str = field(init=False)  # the job's VC, by name (read in the inner loops)
    others: bool = field(init=False)  # may it take other VCs' jobs at all (those not already being stopped)?

    def __post_init__(self) -> None:
        self.own = self.vc.name
        self.others = self.vc.quota.preemption.takes_others(self.reclaim_ok) or self.fair is not None


class NodeSearch(ABC):
    """Node by node victim search over the running jobs of one pass; ``claimed`` grows as plans are committed."""

    def __init__(self, pool: NodePool, index: VictimIndex) -> None:
        self.pool = pool
        self.index = index
        self.claimed: set[str] = set()

    @abstractmethod
    def rule(self, victim: RunningJob, s: Search, local: dict[str, Resources] | None = None) -> str | None:
        """The rule that lets the search's job preempt ``victim`` now, or None. ``local``: victims picked
        tentatively besides the search's chosen ones, per VC."""

    def _choose(self, s: Search, victim: RunningJob, rule: str) -> None:
        v = Victim(victim, rule)
        self._give(v)
        s.chosen.append(v)
        s.keys.add(victim.key)
        if rule != IN_FLIGHT:
            s.freed[victim.vc] = s.freed.get(victim.vc, ZERO) + victim.request
            s.sources.pop(victim.vc, None)

    def _find_nodes(self, s: Search, taken: list[Taken]) -> bool:
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

    def _cheapest_node(self, s: Search, need: Need) -> tuple[int, list[tuple[RunningJob, str]]] | None:
        pool = self.pool
        best: tuple[tuple[object, ...], int, list[tuple[RunningJob, str]]] | None = None
        feasible = 0
        dead = s.dead.setdefault(need.kind, set())
        # a job that may preempt nothing new only looks where its own victims are being stopped
        nodes = chain(s.hints, self._nodes(need)) if s.allow_new else iter(s.hints)
        enough = 1 if s.probe else ENOUGH_CHOICES  # a probe asks only whether there is room
        held = pool.held
        for examined, i in enumerate(nodes):
            if examined >= EXAMINE_NODES or feasible >= enough:
                break
            if (i in dead or not (pool.open[i] or pool.closed_for_whole(i))
                    or (need.gpu_type is not None and pool.gpu_type[i] != need.gpu_type)
                    or pool.total_gpu[i] < need.gpu or pool.total_cpu[i] < need.cpu
                    or pool.total_mem[i] < need.mem or (need.selector and not pool.matches(i, None, need.selector))
                    or (held and i in held and self._held(i, s))):
                continue
            picked = self._victims_on(i, s, need)
            if picked is None:
                dead.add(i)  # victims only get scarcer as the search goes on
                continue
            feasible += 1
            new = [r for r, rule in picked if rule != IN_FLIGHT]
            worst = max(((r.vc == s.own, r.priority, -r.started_at) for r in new), default=(False, -(2**62), 0.0))
            cost = (worst, len(new), len(picked), examined)
            if best is None or cost < best[0]:
                best = (cost, i, picked)
            if not new:
                break  # jobs already being stopped make room: nothing cheaper
        return None if best is None else (best[1], best[2])

    def _nodes(self, need: Need) -> Iterator[int]:
        """Open nodes, emptiest first; where whole-node work runs, its nodes (closed to new work, but a victim's
        eviction frees the whole node) in turn with them, so that both are looked at within EXAMINE_NODES."""
        pool = self.pool
        if not pool.whole:
            return pool.emptiest(need.gpu_type)
        pairs = zip_longest(pool.emptiest(need.gpu_type), pool.whole_nodes(need.gpu_type))
        return (i for pair in pairs for i in pair if i is not None)

    def _held(self, i: int, s: Search) -> bool:
        held = self.pool.held.get(i)
        return held is not None and held[0] != s.job.key and s.job.priority <= held[1]

    def _victims_on(self, i: int, s: Search, need: Need) -> list[tuple[RunningJob, str]] | None:
        """Victims on node ``i``, in order, until ``need`` fits there (and the node is idle for whole-node
        gangs); None when the allowed victims are not enough."""
        pool = self.pool
        g, c, m, p = pool.free_gpu[i], pool.free_cpu[i], pool.free_mem[i], pool.free_ports[i]
        tasks = pool.tasks_on[i]
        rest = pool.total_gpu[i] - g  # GPUs the node's other jobs hold: all that freeing could add
        exclusive = s.gang.exclusive
        # tasks of whole-node work on the node: while any stays, nothing else may run there
        whole, is_whole = (pool.whole.get(i, 0), self.index.whole) if pool.whole else (0, None)
        local: dict[str, Resources] = {}
        picked: list[tuple[RunningJob, str]] = []
        own = s.own
        later: list[OnNode] = []
        done = False
        for phase in (self.index.on_node(i), later):  # other VCs' jobs (and jobs being stopped) first
            for entry in phase:
                r, jg, jc, jm, jt = entry
                if phase is not later and r.vc == own and not r.preempting:
                    later.append(entry)
                    continue
                if (g >= need.gpu and c >= need.cpu and m >= need.mem and p >= need.ports and not (exclusive and tasks)
                        and not whole):
                    done = True
                    break
                rest -= jg
                if r.key in s.keys or r.key in self.claimed:
                    continue
                # another VC's job not being stopped is a victim only where the job may take others' at all
                rule = self.rule(r, s, local) if s.others or phase is later or r.preempting else None
                if rule is None:
                    if exclusive or g + rest < need.gpu:
                        return None  # what is left on the node cannot make room
                    continue
                picked.append((r, rule))
                if whole and is_whole is not None and is_whole(r):
                    whole -= jt
                if rule != IN_FLIGHT:
                    local[r.vc] = local.get(r.vc, ZERO) + r.request
                g, c, m, tasks = g + jg, c + jc, m + jm, tasks - jt
            if done:
                break
        fits = g >= need.gpu and c >= need.cpu and m >= need.mem and p >= need.ports and not whole
        if exclusive:
            fits = fits and tasks == 0 and g == pool.total_gpu[i] and c == pool.total_cpu[i]
        return picked if fits and picked else None

    def _give(self, v: Victim) -> None:
        """Free the victim's tasks in the pool (and the nodes it held whole, once nothing else holds them)."""
        pool = self.pool
        whole = v.whole = bool(pool.whole) and self.index.whole(v.job)
        v.nodes = []
        for task, node in v.job.tasks:
            i = pool.index.get(node)
            if i is not None:
                r = task.resources
                pool.give(i, r.gpu, r.cpu, r.memory_mb, 0)
                if whole:
                    pool.add_whole(i, -1)
                v.nodes.append(i)

    def _take(self, v: Victim) -> None:
        pool = self.pool
        whole = v.whole
        for task, node in v.job.tasks:
            i = pool.index.get(node)
            if i is not None:
                r = task.resources
                pool.take(i, r.gpu, r.cpu, r.memory_mb, 0)
                if whole:
                    pool.add_whole(i, 1)

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
