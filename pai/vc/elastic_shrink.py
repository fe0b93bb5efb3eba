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

from dataclasses import replace

from pai.domain.resources import ZERO, Resources
from pai.vc.capacity import NodePool
from pai.vc.elastic import describe, role_sizes
from pai.vc.fairshare import FairShare
from pai.vc.gang import Gang
from pai.vc.ledger import VcLedger
from pai.vc.preemption import FAIR_SHARE, RECLAIM, WITHIN_VC, Plan, Planner
from pai.vc.reasons import WaitCode
from pai.vc.search import Search
from pai.vc.snapshot import Admission, PendingJob, Resize, ResizeCause, RunningJob, WaitingReason
from pai.vc.state import State
from pai.vc.victims import VictimIndex

_SEP = "\x1f"  # piece keys: job, role, index (the index counted down, so the highest comes first in victim order)
_TOP = 10**7
_CAUSE = {RECLAIM: ResizeCause.RECLAIM, FAIR_SHARE: ResizeCause.FAIR_SHARE}


def parent(key: str) -> str:
    return key.split(_SEP, 1)[0]


def is_piece(key: str) -> bool:
    return _SEP in key


def split(job: RunningJob, exclusive: bool) -> list[RunningJob]:
    """The job as its core (its lowest ``min_instances`` tasks of each role, and every task of other roles; never a
    victim here) and one piece per task above the minimum, highest index first."""
    floors = {e.role: e.min_instances for e in job.elastic}
    seen: dict[str, int] = {}
    core, pieces = [], []
    for t, node in sorted(job.tasks, key=lambda tn: (tn[0].role, tn[0].index)):
        seen[t.role] = n = seen.get(t.role, 0) + 1
        if n <= floors.get(t.role, n):
            core.append((t, node))
        else:
            key = f"{job.key}{_SEP}{t.role}{_SEP}{_TOP - t.index:08d}"
            pieces.append(replace(job, key=key, tasks=((t, node),), whole_nodes=exclusive))
    return [replace(job, tasks=tuple(core), preemptible=False, whole_nodes=exclusive), *pieces]


def _parts(r: RunningJob, exclusive: bool) -> list[RunningJob]:
    """The job as the shrink search sees it: split when elastic; else as it is when leaving (its capacity may be
    used), and not a victim otherwise."""
    if r.elastic and r.preemptible and not r.preempting:
        return split(r, exclusive)
    return [replace(r, preemptible=r.preempting and r.preemptible, whole_nodes=exclusive)]


def _index(state: State, pool: NodePool) -> VictimIndex:
    """The shrink search's victim index of the running jobs' parts. An IncrementalScheduler's State lives on, and so
    does this index: each pass changes only the parts of jobs that changed (new objects), since splitting and
    indexing every running job cost an incremental pass some 100 ms on 10,000 jobs (docs/scheduling.md)."""
    parts, index, jobs = state.shrink_parts, state.shrink_index, state.index.jobs
    if index is None:
        for r in jobs.values():
            parts[r.key] = (r, _parts(r, state.exclusive(r)))
        index = state.shrink_index = VictimIndex((p for _, ps in parts.values() for p in ps), pool.index,
                                                 lambda j: j.whole_nodes)  # whole_nodes: as the State sees it
        return index
    for key, (old, ps) in list(parts.items()):
        if jobs.get(key) is not old:
            for p in ps:
                index.remove(p.key)
            del parts[key]
    for r in jobs.values():
        if r.key not in parts:
            parts[r.key] = (r, _parts(r, state.exclusive(r)))
            for p in parts[r.key][1]:
                index.add(p)
    return index


class Shrinker(Planner):
    """The victim search over pieces of elastic jobs; it shares ``claimed`` with the pass's Planner, so a job
    taken whole is not shrunk and a job shrunk is not taken whole in the same pass."""

    def __init__(self, state: State, pool: NodePool, vcs: dict[str, VcLedger], main: Planner, *, now: float,
                 fair: FairShare | None) -> None:
        super().__init__(pool, vcs, _index(state, pool), now=now, min_run_seconds=main.min_run_seconds, fair=fair)
        self.any = any(len(parts) > 1 for _, parts in state.shrink_parts.values())
        self.claimed = main.claimed
        self.shrunk: set[str] = set()  # jobs shrunk in the pass (also in ``claimed``: not to be taken whole)
        self.running = state.index.jobs
        self.sizes: dict[str, dict[str, int]] = {}  # jobs shrunk in the pass: their sizes by role, counted down

    def rule(self, victim: RunningJob, s: Search, local: dict[str, Resources] | None = None) -> str | None:
        if is_piece(victim.key) and parent(victim.key) in self.claimed and parent(victim.key) not in self.shrunk:
            return None  # taken whole by an earlier plan of the pass
        return super().rule(victim, s, local)

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
