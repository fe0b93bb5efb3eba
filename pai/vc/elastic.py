"""Elastic jobs (``extras.elastic``): admitted at their minimum when their asked size does not fit, grown toward
their maximum from idle capacity (docs/scheduling.md#elastic-jobs). Shrinking is pai.vc.elastic_shrink.

The rules:

* **Admission** (gangs only): the job is tried at the size it asks (its ``tasks``) without preempting anything;
  when that size cannot start now, the job is considered at its minimum, every elastic role cut to its lowest
  ``min_instances`` indices, as any gang (it may then plan preemptions, wait, hold a reservation, for that size
  only). A non-gang job already places what fits, task by task.
* **Growth**, after the pass's admissions and preemptions, in ``schedule(snapshot)`` and the IncrementalScheduler's
  full passes: a running elastic job that is not being stopped, preempted or shrunk in the pass, not also waiting (a
  non-gang job with tasks to place), whose last resize is at least ``resizeIntervalSeconds`` old, gains one task at a
  time of a role below its maximum (the lowest free index, the resources of its role's first task), placed best fit
  with the checks a non-gang task gets: the user's GPU limit, the VC's max, other VCs' lending limits, the per-node
  lending limit and reservations. Jobs whose next task stays within their VC's guarantee go first, then (fair sharing:
  the lowest share of its VC with the task) priority, then the longest running. A job whose task does not fit stops
  growing for the pass.
* **Waiting jobs first**: no job grows while a job of its priority or higher waits for capacity (codes ``NoNodeFits``,
  ``HeldForReservation``, ``HeldByNonPreemptible``, ``PreemptionDeferred``), or while a job of its own VC waits on
  the VC's max or its user's limit: what is idle is theirs when it is enough, and growth would only make it less.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import TYPE_CHECKING

from pai.domain.resources import ZERO, Resources
from pai.vc.fairshare import NO_RANK, share
from pai.vc.gang import Gang
from pai.vc.ledger import VcLedger
from pai.vc.order import always_borrows
from pai.vc.placement import to_admission
from pai.vc.reasons import WaitCode
from pai.vc.snapshot import Decision, ElasticRole, PendingJob, Placement, Resize, ResizeCause, RunningJob, TaskRequest

if TYPE_CHECKING:
    from pai.vc.round import Round

# A waiting job with one of these codes could use capacity that growth would take.
_CAPACITY = frozenset({WaitCode.NO_NODE_FITS.value, WaitCode.HELD_FOR_RESERVATION.value,
                       WaitCode.HELD_BY_NON_PREEMPTIBLE.value, WaitCode.PREEMPTION_DEFERRED.value})
_OWN_VC = frozenset({WaitCode.VC_AT_MAX.value, WaitCode.USER_LIMIT.value})


def at_minimum(job: PendingJob) -> PendingJob | None:
    """The job with each elastic role cut to its lowest ``min_instances`` tasks; None when that is what it asks."""
    floors = {e.role: e.min_instances for e in job.elastic}
    kept: list[TaskRequest] = []
    seen: dict[str, int] = {}
    for t in sorted(job.tasks, key=lambda t: (t.role, t.index)):
        seen[t.role] = n = seen.get(t.role, 0) + 1
        if n <= floors.get(t.role, n):
            kept.append(t)
    if len(kept) == len(job.tasks):
        return None
    order = {(t.role, t.index): k for k, t in enumerate(job.tasks)}
    return replace(job, tasks=tuple(sorted(kept, key=lambda t: order[(t.role, t.index)])))


def consider_elastic(r: Round, job: PendingJob, smaller: PendingJob, vc: VcLedger, *, borrowing: bool) -> bool:
    """Admit the job at its asked size where that starts now (no preemption); else consider it at its minimum."""
    gang = r.gang(job)
    request = gang.request
    if (vc.user_fits(job.user, request.gpu) and r._never_fits(gang) is None and vc.fits_max_now(request)
            and (not borrowing or r._lending_ok(vc, request))):
        taken = r._place_as(job, gang, borrowing)
        if isinstance(taken, list):
            r._admit(job, vc, gang, taken)
            return True
    return r._consider(smaller, vc, borrowing=r._borrows(smaller, vc))


def role_sizes(job: RunningJob) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for t, _ in job.tasks:
        sizes[t.role] = sizes.get(t.role, 0) + 1
    return sizes


def describe(amount: Resources) -> str:
    """``2 GPUs`` (``4 CPUs`` for CPU-only tasks)."""
    if amount.gpu:
        return f"{amount.gpu} GPU" + ("s" if amount.gpu != 1 else "")
    return f"{amount.cpu} CPU" + ("s" if amount.cpu != 1 else "")


class _Grower:
    """One running elastic job growing in a pass: its tasks so far, what it added, which roles may still grow."""

    def __init__(self, job: RunningJob) -> None:
        self.job = job
        self.sizes = role_sizes(job)
        self.used = {(t.role, t.index) for t, _ in job.tasks}
        self.template: dict[str, TaskRequest] = {}
        for t, _ in job.tasks:
            self.template.setdefault(t.role, t)
        self.open = [e for e in job.elastic if e.role in self.template]
        self.added: dict[str, list[tuple[TaskRequest, str]]] = {}
        self._next: tuple[ElasticRole, TaskRequest] | None = None
        self._known = False  # is ``_next`` the task it adds next? (not once it added one)

    def next_task(self) -> tuple[ElasticRole, TaskRequest] | None:
        """The task it would add next (ranked, then placed: made once until it is added)."""
        if not self._known:
            self._next, self._known = self._make_next(), True
        return self._next

    def forget_next(self) -> None:
        self._known = False

    def _make_next(self) -> tuple[ElasticRole, TaskRequest] | None:
        for e in self.open:
            if self.sizes[e.role] < e.max_instances:
                index = 0
                while (e.role, index) in self.used:
                    index += 1
                return e, replace(self.template[e.role], index=index)
        return None


def grow(r: Round, decision: Decision, shrunk: set[str] | frozenset[str] = frozenset()) -> Decision:
    """The decision with growth added (after the pass ``r`` that made it); unchanged when nothing grows."""
    interval = r.cfg.resize_interval_seconds
    growers = [_Grower(j) for j in r.state.index.jobs.values()
               if j.elastic and not j.preempting and j.key not in r.pending_keys and j.key not in shrunk
               and j.key not in r.planner.claimed  # preempted (or shrunk) in the pass
               and (j.last_resized_at is None or r.now >= j.last_resized_at + interval)]
    if not growers:
        return decision
    pending = {j.key: j for j in r.pending}
    blocked_at = max((pending[k].priority for k, w in decision.waiting.items() if w.code in _CAPACITY),
                     default=None)
    own = {pending[k].vc for k, w in decision.waiting.items() if w.code in _OWN_VC}
    everyone = [g for g in growers if g.job.vc in r.vcs and g.job.vc not in own
                and (blocked_at is None or g.job.priority > blocked_at)]
    # The job of the lowest rank grows by one task, again and again. A job's rank only worsens as its VC's usage
    # grows (past its guarantee, then its share), so an entry pushed before its VC last grew is a lower bound:
    # ranked again when it comes up, and the heap's top is the lowest rank of all (not one min() over every job
    # per task: minutes for thousands of jobs growing).
    version = {g.job.vc: 0 for g in everyone}
    heap = [(_rank(r, g), 0, n, g) for n, g in enumerate(everyone)]
    heapq.heapify(heap)
    while heap:
        _, seen, n, g = heapq.heappop(heap)
        if seen != version[g.job.vc]:
            heapq.heappush(heap, (_rank(r, g), version[g.job.vc], n, g))
        elif _add_one(r, g):
            version[g.job.vc] += 1
            heapq.heappush(heap, (_rank(r, g), version[g.job.vc], n, g))
    resizes = [_resize(r, g, role, added) for g in everyone for role, added in g.added.items()]
    return replace(decision, resizes=decision.resizes + tuple(resizes)) if resizes else decision


def _rank(r: Round, g: _Grower) -> tuple[object, ...]:
    nxt = g.next_task()
    vc = r.vcs[g.job.vc]
    request = nxt[1].resources if nxt is not None else ZERO
    borrows = always_borrows(g.job.priority) or not vc.within_guarantee(request)
    rank = (always_borrows(g.job.priority), share(vc.settled + request, vc, r.total)) if (
        borrows and r.fair is not None) else NO_RANK
    return (borrows, rank, -g.job.priority, g.job.started_at, g.job.key)


def _add_one(r: Round, g: _Grower) -> bool:
    """Place the job's next task, with the checks a non-gang task gets; False when it cannot grow (more)."""
    nxt = g.next_task()
    if nxt is None:
        return False
    role, task = nxt
    job, vc = g.job, r.vcs[g.job.vc]
    request = task.resources
    if not vc.user_fits(job.user, request.gpu) or not vc.fits_max_now(request):
        return False
    borrowing = always_borrows(job.priority) or not vc.within_guarantee(request)
    if borrowing and not r._lending_ok(vc, request):
        return False
    as_pending = PendingJob(job.key, job.vc, job.user, job.priority, job.started_at, (task,),
                            whole_nodes=r.state.exclusive(job))
    gang = Gang.of((task,), whole_nodes=as_pending.whole_nodes)
    taken = r._place_as(as_pending, gang, borrowing)
    if not isinstance(taken, list):
        return False
    vc.add(job.user, request)
    r.state.used_all = r.state.used_all + request
    (placement,) = to_admission(r.pool, job.key, taken).placements
    g.added.setdefault(role.role, []).append((task, placement.node))
    g.used.add((task.role, task.index))
    g.sizes[role.role] += 1
    g.forget_next()
    return True


def _resize(r: Round, g: _Grower, role: str, added: list[tuple[TaskRequest, str]]) -> Resize:
    vc = r.vcs[g.job.vc]
    before = g.sizes[role] - len(added)
    amount = sum((t.resources for t, _ in added), ZERO)
    where = (f"in VC `{vc.name}`" if vc.within_guarantee(ZERO) and not always_borrows(g.job.priority)
             else f"in the cluster, borrowed beyond VC `{vc.name}`'s guarantee")
    return Resize(g.job.key, role, before, g.sizes[role], ResizeCause.IDLE_CAPACITY,
                  f"grew to {g.sizes[role]}: {describe(amount)} idle {where}",
                  placements=tuple(Placement(t.role, t.index, node) for t, node in added))
