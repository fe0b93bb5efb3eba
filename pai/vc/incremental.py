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

from pai.vc.round import Memo, Round
from pai.vc.snapshot import Decision, PendingJob, RunningJob, Snapshot, WaitingReason
from pai.vc.state import State


class IncrementalScheduler:
    def __init__(self, snapshot: Snapshot) -> None:
        self.state = State(snapshot)
        self.pending: dict[str, PendingJob] = {j.key: j for j in snapshot.pending}
        self._no_plan: dict[Memo, WaitingReason | None] = {}

    @property
    def running(self) -> dict[str, RunningJob]:
        return self.state.index.jobs

    def submit(self, job: PendingJob) -> None:
        self.pending[job.key] = job

    def cancel(self, key: str) -> None:
        self.pending.pop(key, None)
        self.state.gangs.pop(key, None)

    def finished(self, key: str) -> None:
        job = self.state.finished(key)
        if job is not None:  # its VC uses less: its waiting jobs may now reclaim
            self._no_plan = {k: v for k, v in self._no_plan.items() if k[0] != job.vc}

    def schedule(self, now: float) -> Decision:
        r = Round(self.state, self.pending.values(), now, self._no_plan)
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
        self._no_plan = {k: v for k, v in self._no_plan.items() if v is None}
        return decision
