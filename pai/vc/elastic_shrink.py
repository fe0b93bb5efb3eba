"""Shrinking elastic jobs as a partial preemption (docs/scheduling.md#elastic-jobs).

Where a waiting job would preempt (reclaim, priority within its VC or while borrowing, fair share), it first looks
for a plan whose only new victims are the tasks of running elastic jobs above their minimum: each such task is a
victim of its own (a *piece*), under the same rules as its job (same VC, priority, start time; the minimum run time
holds), taken highest index first on each node; the job's lowest ``min_instances`` tasks of each role, every job
that is not elastic and every non-preemptible job are not victims in that search. Only when no such plan exists is
the usual search made, which preempts whole jobs (elastic ones included) as before. A shrink is not held back by
``resizeIntervalSeconds``: a guarantee (or a higher priority) never waits for hysteresis.

One search per waiting job that would preempt, and only while some running elastic job is above its minimum.
"""

from __future__ import annotations

from itertools import chain, islice

from pai.domain.resources import ZERO, Resources
from pai.vc.capacity import NodePool
from pai.vc.elastic import describe, role_sizes
from pai.vc.fairshare import FairShare
from pai.vc.gang import Gang, Need
from pai.vc.ledger import VcLedger
from pai.vc.preemption import FAIR_SHARE, RECLAIM, WITHIN_VC, Plan, Planner
from pai.vc.reasons import WaitCode
from pai.vc.search import EXAMINE_NODES, Search
from pai.vc.shrink_index import SEP, ShrinkIndex, is_piece
from pai.vc.snapshot import Admission, PendingJob, Resize, ResizeCause, RunningJob, WaitingReason
from pai.vc.state import State

_CAUSE = {RECLAIM: ResizeCause.RECLAIM, FAIR_SHARE: ResizeCause.FAIR_SHARE}


def parent(key: str) -> str:
    return key.split(SEP, 1)[0]


def shrink_index(state: State) -> ShrinkIndex:
    """The shrink search's victim index: a view of the pass's index, its splits kept on the State (an
    IncrementalScheduler's State lives on: a job is split again only when it changed)."""
    return ShrinkIndex(state.index, state.shrink_parts)


class Shrinker(Planner):
    """The victim search over pieces of elastic jobs; it shares ``claimed`` with the pass's Planner, so a job
    taken whole is not shrunk and a job shrunk is not taken whole in the same pass."""

    def __init__(self, state: State, pool: NodePool, vcs: dict[str, VcLedger], main: Planner, *, now: float,
                 fair: FairShare | None) -> None:
        index = shrink_index(state)
        super().__init__(pool, vcs, index, now=now, min_run_seconds=main.min_run_seconds, fair=fair)
        self.any = index.any_piece()
        self.view = index
        self.claimed = main.claimed
        self.shrunk: set[str] = set()  # jobs shrunk in the pass (also in ``claimed``: not to be taken whole)
        self.running = state.index.jobs
        self.sizes: dict[str, dict[str, int]] = {}  # jobs shrunk in the pass: their sizes by role, counted down

    def rule(self, victim: RunningJob, s: Search, local: dict[str, Resources] | None = None) -> str | None:
        if not is_piece(victim.key):
            if not victim.preempting:
                return None  # a core, or a job that is not elastic: not a victim here
        elif parent(victim.key) in self.claimed and parent(victim.key) not in self.shrunk:
            return None  # taken whole by an earlier plan of the pass
        return super().rule(victim, s, local)

    def _cheapest_node(self, s: Search, need: Need) -> tuple[int, list[tuple[RunningJob, str]]] | None:
        """As the search's, answered at once where none of the nodes it would examine has a piece or a job being
        stopped (most of a failed shrink search's nodes: victims are only there)."""
        nodes = chain(s.hints, self._nodes(need)) if s.allow_new else iter(s.hints)
        if self.view.victim_nodes().isdisjoint(islice(nodes, EXAMINE_NODES)):
            return None
        return super()._cheapest_node(s, need)

    def _victims_on(self, i: int, s: Search, need: Need) -> list[tuple[RunningJob, str]] | None:
        if i not in self.view.victim_nodes():
            return None  # no piece and no job being stopped there: nothing the search may take (as it would find)
        return super()._victims_on(i, s, need)

    def plan(self, job: PendingJob, gang: Gang, vc: VcLedger, pending: set[str]) -> Plan | None:
        """A plan whose new victims are all pieces (and at least one); None otherwise."""
        running = self.running.get(job.key)  # a non-gang elastic job partly placed: not shrunk for itself
        if not self.any or (running is not None and running.elastic):
            return None
        found = super().plan(job, gang, vc, pending)
        if found is None or not found.new_victims or not all(is_piece(v.job.key) for v in found.new_victims):
            return None
        return found

    def resizes(self, plan: Plan, job: PendingJob) -> list[Resize]:
        """The shrinks a committed plan makes (its pieces, by job and role), each job's sizes counted down."""
        by: dict[tuple[str, str], list[RunningJob]] = {}
        for v in plan.new_victims:
            t = v.job.tasks[0][0]
            by.setdefault((parent(v.job.key), t.role), []).append(v.job)
        self.shrunk.update(k for k, _ in by)
        self.claimed.update(self.shrunk)  # not taken whole later in the pass
        out = []
        for (key, role), pieces in by.items():
            rule = next(v.rule for v in plan.new_victims if v.job in pieces)
            sizes = self.sizes.get(key) or self.sizes.setdefault(key, role_sizes(self.running[key]))
            before = sizes[role]
            sizes[role] = after = before - len(pieces)
            removed = tuple(sorted((p.tasks[0][0].index for p in pieces), reverse=True))
            amount = sum((p.request for p in pieces), ZERO)
            cause = _CAUSE.get(rule, ResizeCause.PRIORITY)
            out.append(Resize(key, role, before, after, cause, f"shrank to {after}: {_why(cause, job, rule, amount)}",
                              removed=removed, preemptor=job.key))
        return out


def _why(cause: ResizeCause, job: PendingJob, rule: str, amount: Resources) -> str:
    if cause is ResizeCause.RECLAIM:
        return f"VC `{job.vc}` reclaims {describe(amount)}"
    if cause is ResizeCause.FAIR_SHARE:
        return f"fair sharing gives {describe(amount)} to VC `{job.vc}` for {job.key}"
    where = "in its VC" if rule == WITHIN_VC else f"for VC `{job.vc}`, which borrows"
    return f"{job.key} (priority {job.priority}) takes {describe(amount)} {where}"


def waiting_for_tasks(count: int, planned: Admission) -> WaitingReason:
    """The reason of a job planned behind shrinks: ``count`` tasks of elastic jobs stop for it."""
    tasks = "task of an elastic job stops" if count == 1 else "tasks of elastic jobs stop"
    return WaitCode.WAITING_FOR_PREEMPTION.reason(
        f"will start when {count} {tasks}", victims=count,
        placement={f"{p.role}-{p.index}": p.node for p in planned.placements})
