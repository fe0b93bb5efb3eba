"""Trace replay: a workload through the production scheduling path, in simulated time.

The launcher keeps one ``IncrementalScheduler`` between passes and runs a full pass every ``FULL_PASS_SECONDS``
(``pai.domain.timing``); the replay does the same. Time moves from event to event (a heap of arrivals,
completions and the exits of preempted jobs); the events of one instant are applied together and followed by one
pass; while jobs wait, a full pass also runs every ``full_pass_seconds`` without an event, as the launcher's
(reservations and minimum run times depend on the clock). A pass's decision is carried out at once: admitted
jobs start and finish ``duration`` later; a preempted job keeps its resources for the grace period, then exits
and is requeued as the launcher requeues it: waiting again with its original submission time, restarting
from scratch (its finished work is lost). The replay ends when nothing more can happen, or at ``until``.

Elastic jobs (docs/scheduling.md#elastic-jobs-in-the-replay): a job's ``duration`` is its run time at the size it
asks, so its work is ``duration`` x its asked GPUs (tasks, for a job of no GPUs); running on ``k`` of its asked
``n`` GPUs it progresses ``k / n`` times as fast, so it finishes sooner when it grows and later when it shrinks
(linear scaling, no cost to a resize: the job is assumed to re-form from state it keeps). A pass's resizes are
carried out at once: growth adds tasks; a shrink removes the highest indices, whose GPUs stay held (and counted)
for the grace period, as a preempted job's do. Preempted whole, an elastic job restarts from scratch as any job.
With any elastic job in the setup (or ``Setup.snapshot_passes``), every pass is ``schedule(snapshot)``
(pai.vc.replay_passes); ``rigid`` gives the same setup with ``elastic`` stripped, to compare.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from pai.domain.errors import InvalidParametersError
from pai.vc.incremental import IncrementalScheduler
from pai.vc.quota import cluster_total
from pai.vc.replay_log import Attempt, JobOutcome, ReplayLog
from pai.vc.replay_passes import FullPasses
from pai.vc.replay_setup import LiveJob, Setup, is_elastic, rigid, with_usage
from pai.vc.snapshot import Decision, PendingJob, Resize, Snapshot, TaskRequest
from pai.vc.trace import TraceJob

__all__ = ["LiveJob", "Setup", "is_elastic", "replay", "rigid"]

_ARRIVE, _FINISH, _EXIT, _PIECE = 0, 1, 2, 3


@dataclass(slots=True)
class _Run:
    job: PendingJob  # what is (re)submitted
    duration: float
    gpus: int
    live: bool = False
    requeue: bool = True
    attempt: int = 0
    running_since: float | None = None  # since its last start or resize (None: not running)
    leaving: bool = False
    first_start: float | None = None
    completed_at: float | None = None
    preemptions: int = 0
    resizes: int = 0
    # progress, in seconds of run time at the asked size: ``left`` of it at ``since``, running on ``size`` units
    # (GPUs; tasks for a job of no GPUs) of the ``asked``; ``token`` names its one valid finish event
    asked: int = 1
    size: int = 1
    left: float = 0.0
    since: float = 0.0
    token: int = 0
    gpus_held: int = 0
    segments: list[Attempt] = field(default_factory=list)  # of the attempt running, before its last resize


def replay(setup: Setup) -> ReplayLog:
    """Run the workload of ``setup`` through the scheduler; see the module's docstring."""
    return _Replay(setup).run()


def _units(tasks: Iterable[TaskRequest], by_gpu: bool) -> int:
    return sum(t.resources.gpu if by_gpu else 1 for t in tasks)


class _Replay:
    def __init__(self, s: Setup) -> None:
        self.s = s
        self.heap: list[tuple[float, int, int, str, int]] = []
        self.runs: dict[str, _Run] = {}
        self.attempts: list[Attempt] = []
        self.preemptions = self.passes = self.full_passes = 0
        self.resizes: Counter[str] = Counter()
        self.pieces: dict[str, Attempt] = {}  # the tasks shrinks removed, held until they exit (their end: 0)
        self.last: Decision = Decision()
        self.last_event = s.start
        self._seq = itertools.count()
        for live in s.running:
            self._add_live(live)
        for job in s.jobs:
            if s.until is not None and job.submitted_at > s.until:
                continue
            if job.name in self.runs:
                raise InvalidParametersError(f"job {job.name!r} is listed twice", field="jobs")
            pending = PendingJob(key=job.name, vc=job.vc, user=job.user, priority=self._priority(job),
                                 submitted_at=job.submitted_at, tasks=job.tasks, preemptible=job.preemptible,
                                 elastic=job.elastic)
            self.runs[job.name] = _Run(pending, job.duration, job.gpus, asked=_units(job.tasks, job.gpus > 0))
            self._push(max(job.submitted_at, s.start), _ARRIVE, job.name, 0)
        total = cluster_total(s.nodes)
        self.capacity = total.gpu
        self.vcs = s.config.quotas(total)
        nodes, running = with_usage(s.nodes, s.running), tuple(live.job for live in s.running)
        self.inc: IncrementalScheduler | FullPasses = (
            FullPasses(nodes, self.vcs, s.config.scheduler, running) if s.snapshot_passes or is_elastic(s) else
            IncrementalScheduler(Snapshot(now=s.start, nodes=nodes, vcs=self.vcs, running=running,
                                          config=s.config.scheduler)))

    def _priority(self, job: TraceJob) -> int:
        if isinstance(job.priority, int):
            return job.priority
        try:
            return self.s.config.priority(job.priority)
        except InvalidParametersError as e:
            raise InvalidParametersError(f"job {job.name}: {e.message}", field="priority") from None

    def _add_live(self, live: LiveJob) -> None:
        j = live.job
        pending = PendingJob(key=j.key, vc=j.vc, user=j.user, priority=j.priority, submitted_at=live.submitted_at,
                             tasks=tuple(t for t, _ in j.tasks), preemptible=j.preemptible, whole_nodes=j.whole_nodes,
                             elastic=j.elastic)
        units = _units(pending.tasks, j.request.gpu > 0)
        run = _Run(pending, live.duration, j.request.gpu, live=True, requeue=not live.stopping,
                   running_since=self.s.start, first_start=j.started_at, leaving=live.stopping, asked=units,
                   size=units, since=self.s.start, gpus_held=j.request.gpu)
        run.left = min(self.s.grace_seconds, live.remaining) if live.stopping else live.remaining
        self.runs[j.key] = run
        self._push(self.s.start + run.left, _FINISH, j.key, 0)

    def _push(self, at: float, kind: int, key: str, attempt: int) -> None:
        heapq.heappush(self.heap, (at, next(self._seq), kind, key, attempt))

    def run(self) -> ReplayLog:
        s, now = self.s, self.s.start
        last_full, last_was_full = -math.inf, False
        until = math.inf if s.until is None else s.until
        while True:
            at = self.heap[0][0] if self.heap else math.inf
            if (self.inc.pending or self._may_grow()) and (self.heap or not last_was_full):
                at = min(at, max(last_full + s.full_pass_seconds, now))  # the launcher's periodic full pass
            if at == math.inf or at > until:
                break
            now = at
            while self.heap and self.heap[0][0] <= now:
                _, _, kind, key, attempt = heapq.heappop(self.heap)
                self._event(now, kind, key, attempt)
            full = now >= last_full + s.full_pass_seconds  # as ``at`` has it (not now - last_full: rounding)
            self._carry_out(now, self.inc.schedule(now, full=full))
            self.passes += 1
            last_was_full = full
            if full:
                last_full = now
                self.full_passes += 1
        end = until if s.until is not None else self.last_event
        for run in self.runs.values():
            if run.running_since is not None:
                self._end_attempt(run, end, preempted=False)
        self.attempts.extend(replace(p, end=end) for p in self.pieces.values())
        return ReplayLog(tuple(self._outcome(k, r) for k, r in self.runs.items()), tuple(self.attempts),
                         tuple(q.name for q in self.vcs), s.start, end, self.capacity, self.preemptions,
                         self.passes, self.full_passes, dict(self.resizes.most_common()))

    def _may_grow(self) -> bool:
        """Could a running elastic job grow (a periodic pass then runs, as the launcher's full pass would)?"""
        return isinstance(self.inc, FullPasses) and any(
            j.elastic and not j.preempting and sum(1 for t, _ in j.tasks if t.role == e.role) < e.max_instances
            for j in self.inc.running.values() for e in j.elastic)

    def _end_attempt(self, run: _Run, now: float, *, preempted: bool) -> None:
        assert run.running_since is not None
        self.attempts.extend(replace(a, preempted=preempted) for a in run.segments)
        self.attempts.append(Attempt(run.gpus_held, run.running_since, now, preempted))
        run.segments = []

    def _event(self, now: float, kind: int, key: str, attempt: int) -> None:
        if kind == _PIECE:  # tasks a shrink removed exit at the end of their grace period
            self.last_event = now
            self.attempts.append(replace(self.pieces.pop(key), end=now))
            self.inc.finished(key)
            return
        run = self.runs[key]
        if kind == _ARRIVE:
            self.last_event = now
            self.inc.submit(run.job)
            return
        if run.running_since is None or (run.token if kind == _FINISH else run.attempt) != attempt:
            return  # an attempt that already ended (it finished before its preemption took effect), or resized
        self.last_event = now
        preempted = kind == _EXIT
        self._end_attempt(run, now, preempted=preempted)
        run.running_since = None
        self.inc.finished(key)
        if not run.requeue:  # a live job that was being stopped: gone
            return
        if not preempted:
            run.completed_at = now
            return
        run.attempt += 1  # preempted: requeued as the launcher does, with its original submission time
        run.leaving = False
        self.inc.submit(run.job)

    def _carry_out(self, now: float, d: Decision) -> None:
        self.last = d
        for a in d.admissions:
            run = self.runs[a.job]
            run.running_since = now
            if run.first_start is None:
                run.first_start = now
            placed = {(p.role, p.index) for p in a.placements}
            tasks = [t for t in run.job.tasks if (t.role, t.index) in placed]
            run.gpus_held, run.left, run.since = sum(t.resources.gpu for t in tasks), run.duration, now
            self._progress(run, now, _units(tasks, run.gpus > 0))
        for z in d.resizes:
            self._resize(now, z)
        for p in d.preemptions:
            run = self.runs[p.victim]
            if run.leaving or run.running_since is None:
                continue
            run.leaving = True
            run.preemptions += 1
            self.preemptions += 1
            self._push(now + self.s.grace_seconds, _EXIT, p.victim, run.attempt)

    def _progress(self, run: _Run, now: float, size: int) -> None:
        """The job runs on ``size`` units from ``now``: its work so far is counted, its finish moves."""
        run.left = max(0.0, run.left - (now - run.since) * run.size / run.asked)
        run.since, run.size = now, max(size, 1)
        run.token += 1
        self._push(now + run.left * run.asked / run.size, _FINISH, run.job.key, run.token)

    def _resize(self, now: float, z: Resize) -> None:
        assert isinstance(self.inc, FullPasses)
        run = self.runs[z.job]
        if run.running_since is None:
            return
        piece = self.inc.resize(now, z)
        self.resizes[z.cause.value] += 1
        run.resizes += 1
        job = self.inc.running[z.job]
        run.segments.append(Attempt(run.gpus_held, run.running_since, now))
        run.running_since, run.gpus_held = now, job.request.gpu
        self._progress(run, now, _units((t for t, _ in job.tasks), run.gpus > 0))
        if piece is not None:
            self.pieces[piece.key] = Attempt(piece.request.gpu, now, 0.0)
            self._push(now + self.s.grace_seconds, _PIECE, piece.key, 0)

    def _outcome(self, key: str, run: _Run) -> JobOutcome:
        waiting = self.last.waiting.get(key)
        if run.completed_at is not None or not run.requeue:
            reason = ""
        elif run.running_since is not None:
            reason = "Running"
        else:
            reason = waiting.code if waiting is not None else "Queued"
        job = run.job
        return JobOutcome(key, job.vc, run.gpus, job.submitted_at, run.duration, run.first_start, run.completed_at,
                          run.preemptions, reason, live=run.live, resizes=run.resizes)
