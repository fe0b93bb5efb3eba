"""IncrementalScheduler: the scheduler's state kept between passes, for a pass in milliseconds after one event.

The first pass is exactly ``schedule(snapshot)``. After each pass the scheduler assumes the launcher acts on the
Decision (admitted jobs start at the pass's ``now``, victims are being stopped); the launcher reports everything
else as events: ``submit``, ``cancel``, ``finished`` (a running job exited, victims included). A pass then
skips what a full pass spends its time on: building node capacity, VC usage and victim indexes, the shapes of
pending jobs, and preemption searches that found no allowed victims (retried once a job of the preemptor's VC
finishes, or at the next full pass). Run ``schedule(snapshot)`` now and then (say every minute) as the
reference; an incremental pass may postpone a preemption that only jobs started since then make possible.
"""

from __future__ import annotations

from dataclasses import replace

from pai.domain.resources import Resources
from pai.vc.round import Memo, Round
from pai.vc.snapshot import Decision, PendingJob, RunningJob, Snapshot, WaitingReason
from pai.vc.state import State


class IncrementalScheduler:
    def __init__(self, snapshot: Snapshot) -> None:
        self.state = State(snapshot)
        self.pending: dict[str, PendingJob] = {j.key: j for j in snapshot.pending}
        self._no_plan: dict[Memo, WaitingReason | None] = {}
        self._requests: dict[Memo, Resources] = {}  # the gang request behind each kept search result
        self._waiting: dict[str, WaitingReason] = {}  # reasons of the last pass, for jobs it did not plan
        self._freed = True  # capacity or claims freed since the last pass: every waiting job is reconsidered

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

    def finished(self, key: str) -> None:
        """A running job exited (victims included): its capacity is free."""
        job = self.state.finished(key)
        if job is None:
            return
        self._freed = True
        ledger = self.state.vcs.get(job.vc)
        if ledger is None or job.preempting:  # a victim that was already counted as leaving changes nothing
            return
        # Its VC uses less: a search of that VC that found no allowed victims is retried only if the job may
        # now reclaim (its VC falls within its guarantee with the job where it did not before).
        self._no_plan = {
            k: v for k, v in self._no_plan.items()
            if k[0] != job.vc or k not in self._requests
            or ledger.within_guarantee(self._requests[k] + job.request) == ledger.within_guarantee(self._requests[k])
        }

    def schedule(self, now: float, *, full: bool = False) -> Decision:
        """One pass. Only arrivals since the last pass: only the new jobs (and jobs waiting for their victims)
        are considered; others keep their reasons, since nothing they need was freed. ``full``: reconsider
        every job and retry every victim search, like ``schedule(snapshot)``."""
        if full:
            self._no_plan = {}
            self._requests = {}
        known = None if full or self._freed else {k: v for k, v in self._waiting.items() if k in self.pending}
        r = Round(self.state, self.pending.values(), now, self._no_plan, known)
        decision = r.run()
        r.undo()
        for job, taken in r.admitted:
            tasks = {(t.role, t.index): t for t in job.tasks}
            placed = tuple((tasks[(t.need.role, t.need.index)], self.state.pool.names[t.node]) for t in taken)
            self.state.started(RunningJob(job.key, job.vc, job.user, job.priority, now, placed))
            del self.pending[job.key]
            self.state.gangs.pop(job.key, None)
        for p in decision.preemptions:
            victim = self.state.index.jobs[p.victim]
            self.state.preempting(replace(victim, preempting=True, preempted_by=p.preemptor))
        # only "no allowed victims" outlives the pass; a budget that ran out is renewed every pass
        kept = {k: v for k, v in r.failed_searches().items() if v is None}
        self._no_plan.update(kept)
        self._requests.update((k, r.searched[k]) for k in kept if k in r.searched)
        self._waiting = {k: v for k, v in decision.waiting.items() if k not in decision.planned}
        self._freed = False
        return decision
