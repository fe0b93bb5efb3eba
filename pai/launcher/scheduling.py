"""The production scheduling path: one ``IncrementalScheduler`` kept between passes, fed with what changed.

Every change to a job goes through the launcher on the writer thread, which marks the job (``changed``). A pass
loads the marked jobs, and only those, hands their new form to the scheduler (``follow``: submitted, requeued,
withdrawn, a task ended, being stopped, priority changed) and runs one incremental pass: its cost is what
changed, not the number of jobs in the cluster. What the scheduler does not follow piece by piece sets it
``stale``, and the next pass is a full one, rebuilt exactly as ``schedule(snapshot)``: a node that joins, is
lost, cordoned, drained, uncordoned or changes its GPUs (the launcher calls ``invalidate``), and any change of
the VCs or the scheduler settings (the pass compares the cluster configuration, cached until a write drops it,
every time). Such a pass starts from the active jobs the scheduler follows (``jobs``, brought up to date by
``refresh``); the first pass, one after a rolled-back pass and one every ``full_pass_seconds`` read every active
job (and the configuration) from the store: the safety net (and the reference for the few preemptions an
incremental pass may postpone; see ``pai.vc.incremental``).

A job that declares no ``extras.expectedDurationSeconds`` is handed over with its typical run time (``durations``,
``pai.launcher.durations``), as a waiting job too, so that a pass that starts it already knows when it should end.
A pair's typical run time is read when a pass first meets one of its jobs, and renewed only by a full pass (once
``durations.max_age_seconds`` old), which is rebuilt with the new value: running jobs change their expected run
time there, never in an incremental pass (a job followed there gets the value the scheduler already holds, so a
running job followed again is the same; were it not, one whose expected run time alone changed is ``replaced``,
nothing else moves). Hints already given keep their times until a full pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pai.domain.job import Job
from pai.domain.states import JobState
from pai.domain.timing import FULL_PASS_SECONDS
from pai.launcher.cluster import Cluster
from pai.launcher.durations import TypicalDurations
from pai.launcher.snapshot import LEAVING, as_pending, as_running, hold_back, leaving, unplaced
from pai.vc import Decision, IncrementalScheduler, Snapshot, WaitingReason


@dataclass
class Scheduling:
    full_pass_seconds: float = FULL_PASS_SECONDS
    inc: IncrementalScheduler | None = None
    clu: Cluster | None = None
    ids: dict[str, str] = field(default_factory=dict)  # job key -> id, of the active jobs the scheduler knows
    stored: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # job key -> its stored waiting reason
    held: dict[str, WaitingReason] = field(default_factory=dict)  # waiting jobs of a stopped or missing VC
    jobs: dict[str, Job] = field(default_factory=dict)  # job key -> the active job, as the store has it
    full_passes: int = 0
    reloads: int = 0
    passes: int = 0
    postponed: int = 0  # admissions the last pass decided and left to the next one (``postpone``)
    durations: TypicalDurations = field(default_factory=TypicalDurations)  # for jobs that declare no duration
    _dirty: set[str] = field(default_factory=set)  # ids of jobs changed since the last pass
    _stale: bool = True
    _reload: bool = True  # the next full pass reads every active job from the store
    _last_full: float = -math.inf  # the last full pass read from the store

    def changed(self, job_id: str) -> None:
        """A job was submitted or changed: the next pass looks at it again."""
        self._dirty.add(job_id)

    def invalidate(self, *, reload: bool = False) -> None:
        """Something the scheduler does not follow changed (a node): the next pass is a full one. ``reload``: what
        it holds may differ from the store (a pass was rolled back): that full pass reads every job again."""
        self._stale = True
        self._reload = self._reload or reload

    def needs_full(self, now: float, clu: Cluster) -> bool:
        return (self._stale or self.inc is None or clu != self.clu
                or now - self._last_full >= self.full_pass_seconds)

    def needs_reload(self, now: float) -> bool:
        """Whether a full pass reads every active job from the store: the first one, after a rolled-back pass, and
        every ``full_pass_seconds`` (the safety net). Otherwise (a node joined, was lost, cordoned...) it starts
        from the jobs it follows, brought up to date by ``refresh``: a few rows, not the whole queue."""
        return self._reload or self.inc is None or now - self._last_full >= self.full_pass_seconds

    def refresh(self, changed: Iterable[Job]) -> list[Job]:
        """Every active job, oldest submission first, from the jobs followed and ``changed`` (those marked since the
        last pass, read from the store)."""
        for job in changed:
            if job.state.is_terminal():
                self.jobs.pop(job.key, None)
            else:
                self.jobs[job.key] = job
        return sorted(self.jobs.values(), key=lambda j: (j.submitted_at, j.id))

    def rebuild(self, snapshot: Snapshot, clu: Cluster, held: dict[str, WaitingReason], jobs: Iterable[Job],
                now: float, *, reloaded: bool) -> None:
        """Start over from a full snapshot (``jobs``: every active job; ``reloaded``: read from the store now)."""
        self.inc = IncrementalScheduler(snapshot)
        self.clu = clu
        self.held = dict(held)
        self.ids = {}
        stored, self.stored = self.stored, {}
        self.jobs = {}
        for job in jobs:
            self.ids[job.key] = job.id
            self.jobs[job.key] = job
            if job.state is JobState.WAITING or unplaced(job) is not None:  # the reason the store holds (a
                # followed job's may be older)
                self.stored[job.key] = job.waiting_reason if reloaded else stored.get(job.key, job.waiting_reason)
        self._dirty.clear()
        self._stale = False
        if reloaded:
            self._reload = False
            self._last_full = now
            self.reloads += 1
        self.full_passes += 1

    def take_changed(self) -> set[str]:
        dirty, self._dirty = self._dirty, set()
        return dirty

    def settled(self, jobs: Iterable[Job]) -> None:
        """The pass itself changed these jobs as its decision said (admitted, preempted): the scheduler already
        holds their new form."""
        for job in jobs:
            self._dirty.discard(job.id)
            self.jobs[job.key] = job
            if job.state is not JobState.WAITING and unplaced(job) is None:
                self.stored.pop(job.key, None)
                if self.inc is not None and job.key in self.inc.pending:  # a non-gang job preempted: it is
                    self.inc.cancel(job.key)  # requeued whole once its placed tasks are gone; what waits is withdrawn

    def postpone(self, jobs: list[Job]) -> None:
        """Admissions the pass decided but did not act on (more than a pass acts on): the scheduler takes these
        jobs back as waiting, as they are in the store, and the next pass decides them again."""
        self.follow(jobs)
        self.postponed = len(jobs)

    def follow(self, jobs: Iterable[Job]) -> None:
        """Hand the scheduler the current form of each changed job."""
        inc, clu = self.inc, self.clu
        assert inc is not None and clu is not None
        for job in jobs:
            key = job.key
            self._leaving(inc, job)
            self.held.pop(key, None)
            if job.state.is_terminal():
                self.jobs.pop(key, None)
            else:
                self.jobs[key] = job
            if job.state is JobState.WAITING:
                self.ids[key] = job.id
                self.stored[key] = job.waiting_reason
                held, reasons = hold_back([job], clu)
                if held:
                    self.held.update(reasons)
                    self._drop(inc, key)
                elif inc.pending.get(key) != (pending := as_pending(job, self.durations.of(job))):
                    self._drop(inc, key)
                    inc.submit(pending)
                continue
            running = as_running(job, self.durations.of(job)) if not job.state.is_terminal() else None
            rest = unplaced(job)
            if rest is not None:
                held, reasons = hold_back([job], clu)
                if held:  # its VC is stopped or gone: what runs stays, what waits is not placed
                    self.held.update(reasons)
                    rest = None
                    self.stored[key] = job.waiting_reason
            if rest is None:
                if key not in self.held:
                    self.stored.pop(key, None)
            else:  # a non-gang job's tasks that wait: pending beside its running part, with its reason
                self.stored[key] = job.waiting_reason
            if running is None and rest is None and key not in self.held:
                self._drop(inc, key)
                self.ids.pop(key, None)
                continue
            self.ids[key] = job.id
            if running is not None:
                inc.changed(running)  # (drops the pending part: given back below)
            elif key in inc.running:
                inc.finished(key)
            if rest is None:
                if key in inc.pending:
                    inc.cancel(key)
            elif inc.pending.get(key) != rest:
                inc.pending.pop(key, None)
                inc.submit(rest)

    @staticmethod
    def _leaving(inc: IncrementalScheduler, job: Job) -> None:
        """The tasks a shrink is stopping: a leaving job of their own (pai.launcher.snapshot), gone once they are."""
        gone = None if job.state.is_terminal() else leaving(job)
        if gone is not None:
            inc.changed(gone)
        elif job.key + LEAVING in inc.running:
            inc.finished(job.key + LEAVING)

    @staticmethod
    def _drop(inc: IncrementalScheduler, key: str) -> None:
        if key in inc.pending:
            inc.cancel(key)
        if key in inc.running:  # (a non-gang job may be both)
            inc.finished(key)

    def run(self, now: float, *, full: bool = False) -> Decision:
        """One pass; the jobs held back wait with their reasons."""
        assert self.inc is not None
        self.postponed = 0
        decision = self.inc.schedule(now, full=full)
        decision.waiting.update(self.held)
        self.passes += 1
        return decision

    def reasons_to_store(self, decision: Decision) -> dict[str, dict[str, Any]]:
        """Job id -> waiting reason, for the waiting jobs whose reason differs from the stored one."""
        out: dict[str, dict[str, Any]] = {}
        for key, reason in decision.waiting.items():
            body = reason.to_dict()
            if key in self.stored and self.stored[key] != body:
                self.stored[key] = body
                out[self.ids[key]] = body
        return out
