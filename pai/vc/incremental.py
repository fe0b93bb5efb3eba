"""IncrementalScheduler: the scheduler's state kept between passes, for a pass in milliseconds after one event.

The first pass is exactly ``schedule(snapshot)``. After each pass the scheduler assumes the launcher acts on the
Decision (admitted jobs start at the pass's ``now``, victims are being stopped); the launcher reports everything
else as events: ``submit``, ``cancel``, ``finished`` (a running job exited, victims included), ``changed`` (a
running job no pass admitted, or whose holdings changed: a task ended, the job is being stopped). A pass then
skips what a full pass spends its time on: building node capacity, VC usage and victim indexes, the shapes of
pending jobs, and preemption searches that found no allowed victims (retried once a job of the preemptor's VC
finishes, or at the next full pass). Run ``schedule(snapshot)`` now and then (say every minute) as the
reference; an incremental pass may postpone a preemption that only jobs started since then make possible.

Elastic jobs (pai.vc.elastic): every pass shrinks them before preempting whole jobs; growth is computed on full
passes only (``full``), from what the pass leaves idle. The scheduler takes the growth it decides at once (the
launcher starts the tasks); a shrink's tasks are followed as the launcher reports them (``changed``), leaving.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from pai.domain.resources import ZERO, Resources
from pai.vc.elastic import grow
from pai.vc.reasons import WaitCode
from pai.vc.round import Memo, Round
from pai.vc.snapshot import Admission, Decision, PendingJob, Resize, RunningJob, Snapshot, TaskRequest, WaitingReason
from pai.vc.state import State


class IncrementalScheduler:
    def __init__(self, snapshot: Snapshot) -> None:
        self.state = State(snapshot)
        self.pending: dict[str, PendingJob] = {j.key: j for j in snapshot.pending}
        self._no_plan: dict[Memo, WaitingReason | None] = {}
        self._waiting: dict[str, WaitingReason] = {}  # reasons of the last pass, for jobs it did not plan
        self._freed = True  # capacity or claims freed since the last pass: every waiting job is reconsidered
        self._planned: dict[str, Admission] = {}  # the jobs the last pass planned behind preemptions, and where
        # When running jobs' minimum run time ends (they become victims a search may take): (time, key)
        self._protected: list[tuple[float, str]] = []
        for job in snapshot.running:
            self._protect(job)

    @property
    def running(self) -> dict[str, RunningJob]:
        return self.state.index.jobs

    def submit(self, job: PendingJob) -> None:
        self.pending[job.key] = job

    def cancel(self, key: str) -> None:
        """A pending job is withdrawn (jobs being stopped for it may now serve others)."""
        self.pending.pop(key, None)
        self.state.gangs.pop(key, None)
        self._freed = True
        self._no_plan = {}  # what it planned to take (victims, capacity leaving) may serve a search that found none

    def finished(self, key: str) -> None:
        """A running job exited (victims included): its capacity is free, and so are the claims that kept other
        jobs' searches from finding room (a job planned there may now start elsewhere)."""
        if self.state.finished(key) is not None:
            self._freed = True
            self._no_plan = {}

    def _protect(self, job: RunningJob) -> None:
        if self.state.cfg.min_run_seconds > 0:
            heapq.heappush(self._protected, (job.started_at + self.state.cfg.min_run_seconds, job.key))

    def _unprotect(self, now: float) -> None:
        """Jobs whose minimum run time has ended since the last pass may now be preempted: searches that found no
        allowed victims are retried, and every waiting job is reconsidered."""
        ended = False
        while self._protected and self._protected[0][0] <= now:
            heapq.heappop(self._protected)
            ended = True
        if ended:
            self._no_plan = {}
            self._freed = True

    def changed(self, job: RunningJob) -> None:
        """A running job as the launcher has it now: one no pass admitted (restarted elsewhere, followed from the
        store) is counted; a known one whose holdings or leaving changed is finished and counted anew; one that
        differs only in its record (start time, the job it leaves for) is replaced."""
        old = self.state.index.jobs.get(job.key)
        if old == job:
            return
        if old is not None and old.preempting == job.preempting and _holdings(old) == _holdings(job):
            self.state.replaced(job)
            return
        if old is not None:
            self.finished(job.key)
        self.pending.pop(job.key, None)
        self.state.gangs.pop(job.key, None)
        self.state.added(job)
        self._protect(job)
        if job.preempting:  # leaving for nobody waiting: a search that found nothing may plan behind it now
            self._no_plan = {}
            self._freed = True

    def schedule(self, now: float, *, full: bool = False) -> Decision:
        """One pass. Only arrivals since the last pass: only the new jobs (and jobs waiting for their victims)
        are considered; others keep their reasons, since nothing they need was freed. ``full``: reconsider
        every job and retry every victim search, like ``schedule(snapshot)``."""
        if full:
            self._no_plan = {}
        self.state.pool.in_order()
        self._unprotect(now)
        lending = self.state.lending  # per-node borrowed work: the VCs whose running jobs changed, computed again
        if lending is not None and lending.refresh(self.state.index, self.state.vcs):
            self._no_plan = {}  # a node holds less borrowed work: what the limit refused may fit now
            self._freed = True
        known = None if full or self._freed else {k: v for k, v in self._waiting.items() if k in self.pending}
        r = Round(self.state, self.pending.values(), now, self._no_plan, known, elastic=True)
        decision = r.run()
        if full and any(j.elastic for j in self.state.index.jobs.values()):
            decision = grow(r, decision, shrunk={z.job for z in decision.resizes})
        r.undo()
        self._grown(decision.resizes, now)
        grown: dict[str, Resources] = {}  # non-gang jobs that ran and placed more tasks: what they added
        for job, taken in r.admitted:
            tasks = {(t.role, t.index): t for t in job.tasks}
            placed = tuple((tasks[(t.need.role, t.need.index)], self.state.pool.names[t.node]) for t in taken)
            self.state.gangs.pop(job.key, None)
            if not job.gang and self._placed_more(job, placed, now, grown):
                continue
            started = RunningJob(job.key, job.vc, job.user, job.priority, now, placed, preemptible=job.preemptible,
                                 whole_nodes=job.whole_nodes, gang=job.gang, expected_seconds=job.expected_seconds,
                                 expected_typical=job.expected_typical, elastic=job.elastic)
            self.state.started(started)
            self._protect(started)
            del self.pending[job.key]
        for p in decision.preemptions:
            victim = self.state.index.jobs[p.victim]
            self.state.preempting(replace(victim, preempting=True, preempted_by=p.preemptor))
            if p.victim in grown and (ledger := self.state.vcs.get(victim.vc)) is not None:
                ledger.mark_leaving(grown[p.victim])  # the pass marked what it ran before it grew
        planned, self._planned = self._planned, decision.planned
        if decision.planned != planned:
            # Jobs planned behind preemptions hold capacity for one pass; this pass held other capacity than the
            # last one, so what failed for want of capacity is tried again next pass: every job, every search.
            self._no_plan = {}
            self._waiting = {}
            self._freed = True
            return decision
        # only "no allowed victims" outlives the pass; a budget that ran out is renewed every pass
        kept = {k: v for k, v in r.failed_searches().items() if v is None}
        self._no_plan.update(kept)
        # a job whose preemption this pass's budget deferred is reconsidered next pass, as a full pass would
        self._waiting = {k: v for k, v in decision.waiting.items() if v.code != WaitCode.PREEMPTION_DEFERRED}
        self._freed = False
        return decision

    def _grown(self, resizes: tuple[Resize, ...], now: float) -> None:
        """The jobs a pass grew hold their new tasks (the pass took their capacity and VC usage)."""
        for z in resizes:
            old = self.state.index.jobs.get(z.job)
            if old is None or not z.placements:
                continue
            template = next(t for t, _ in old.tasks if t.role == z.role)
            placed = tuple((replace(template, index=p.index), p.node) for p in z.placements)
            self.state.grew(replace(old, last_resized_at=now), placed)

    def _placed_more(self, job: PendingJob, placed: tuple[tuple[TaskRequest, str], ...], now: float,
                     grown: dict[str, Resources]) -> bool:
        """A pass placed tasks of a non-gang job (pai.vc.nongang): the running job of its key holds them (it starts
        now, or grows), and the tasks not placed stay pending under the same key. False when the pass placed every
        task of a job that held none: it starts as any job does."""
        done = {(t.role, t.index) for t, _ in placed}
        rest = tuple(t for t in job.tasks if (t.role, t.index) not in done)
        old = self.state.index.jobs.get(job.key)
        if old is None and not rest:
            return False
        if old is not None:
            self.state.grew(old, placed)
            grown[job.key] = sum((t.resources for t, _ in placed), ZERO)
        else:
            started = RunningJob(job.key, job.vc, job.user, job.priority, now, placed, preemptible=job.preemptible,
                                 whole_nodes=job.whole_nodes, gang=False, expected_seconds=job.expected_seconds,
                                 expected_typical=job.expected_typical, elastic=job.elastic)
            self.state.started(started)
            self._protect(started)
        if rest:
            self.pending[job.key] = replace(job, tasks=rest)
        else:
            del self.pending[job.key]
        return True


def _holdings(job: RunningJob) -> list[tuple[TaskRequest, str]]:
    """What a running job holds where, in one order whatever the order its tasks were listed in."""
    return sorted(job.tasks, key=lambda tn: (tn[0].role, tn[0].index, tn[1]))
