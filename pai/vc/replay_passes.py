"""The replay's scheduler when jobs are elastic: every pass is ``schedule(snapshot)`` over the replay's own view.

``IncrementalScheduler`` does not follow resizes yet (pai.vc.round), so a replay with elastic jobs, and the rigid
run it is compared with, take the reference path instead: the nodes' usage, the running jobs (with their sizes and
last resizes) and the waiting jobs are handed to ``schedule`` at every pass, and its Decision is carried out here as
the launcher carries it out: admitted jobs run, victims are being stopped, grown jobs hold their new tasks at once,
and the tasks a shrink removes leave as a *piece* (a job of their own, being stopped) that holds its capacity
until the grace period ends. Slower than the incremental path (a full pass per event), the same decisions.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from pai.domain.resources import Resources
from pai.vc.policy import SchedulerConfig
from pai.vc.schedule import schedule
from pai.vc.snapshot import Decision, NodeView, PendingJob, Resize, RunningJob, Snapshot, TaskRequest, VcQuota

PIECE = "\x1e"  # piece keys: job, PIECE, a number


class FullPasses:
    def __init__(self, nodes: tuple[NodeView, ...], vcs: tuple[VcQuota, ...], config: SchedulerConfig,
                 running: tuple[RunningJob, ...]) -> None:
        self.nodes = tuple(replace(n, used=Resources()) for n in nodes)
        self.vcs, self.config = vcs, config
        self.running: dict[str, RunningJob] = {j.key: j for j in running}
        self.pending: dict[str, PendingJob] = {}
        self._seq = itertools.count(1)

    def submit(self, job: PendingJob) -> None:
        self.pending[job.key] = job

    def finished(self, key: str) -> None:
        self.running.pop(key, None)

    def schedule(self, now: float, *, full: bool = True) -> Decision:
        """One pass over everything (``full`` is for the incremental scheduler's signature: every pass is)."""
        used: dict[str, Resources] = {}
        for job in self.running.values():
            for t, node in job.tasks:
                used[node] = used.get(node, Resources()) + t.resources
        nodes = tuple(replace(n, used=used[n.name]) if n.name in used else n for n in self.nodes)
        d = schedule(Snapshot(now, nodes, self.vcs, tuple(self.running.values()), tuple(self.pending.values()),
                              self.config))
        for a in d.admissions:
            waited = self.pending.pop(a.job)
            asked = {(t.role, t.index): t for t in waited.tasks}
            self.running[a.job] = RunningJob(
                waited.key, waited.vc, waited.user, waited.priority, now,
                tuple((asked[(p.role, p.index)], p.node) for p in a.placements), preemptible=waited.preemptible,
                whole_nodes=waited.whole_nodes, gang=waited.gang, elastic=waited.elastic)
        for p in d.preemptions:
            victim = self.running.get(p.victim)
            if victim is not None:
                self.running[p.victim] = replace(victim, preempting=True, preempted_by=p.preemptor)
        return d

    def resize(self, now: float, z: Resize) -> RunningJob | None:
        """Carry out a resize of the last pass; returns the piece a shrink leaves (being stopped), else None."""
        job = self.running[z.job]
        if z.placements:
            template = next(t for t, _ in job.tasks if t.role == z.role)
            added = tuple((replace(template, index=p.index), p.node) for p in z.placements)
            self.running[z.job] = replace(job, tasks=job.tasks + added, last_resized_at=now)
            return None
        gone = set(z.removed)
        kept = tuple((t, n) for t, n in job.tasks if t.role != z.role or t.index not in gone)
        left: tuple[tuple[TaskRequest, str], ...] = tuple(
            (t, n) for t, n in job.tasks if t.role == z.role and t.index in gone)
        self.running[z.job] = replace(job, tasks=kept, last_resized_at=now)
        piece = RunningJob(f"{z.job}{PIECE}{next(self._seq)}", job.vc, job.user, job.priority, job.started_at, left,
                           preempting=True, preempted_by=z.preemptor, preemptible=job.preemptible,
                           whole_nodes=job.whole_nodes, gang=job.gang)
        self.running[piece.key] = piece
        return piece
