"""Running jobs indexed for victim search: per node and per VC in victim order, and by whom they were preempted.

Built lazily (a pass that preempts nothing never pays for it) and kept up to date as jobs start, stop and are
preempted, so an incremental scheduler can reuse it across passes."""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable

from pai.vc.snapshot import RunningJob


def victim_order(job: RunningJob) -> tuple[int, float, str]:
    """Lower priority first, then most recently started first."""
    return (job.priority, -job.started_at, job.key)


def _node_order(job: RunningJob) -> tuple[bool, int, float, str]:
    """On a node: jobs already being stopped first, then victim order."""
    return (not job.preempting, *victim_order(job))


class VictimIndex:
    def __init__(self, running: Iterable[RunningJob], node_index: dict[str, int]) -> None:
        self.jobs = {r.key: r for r in running}
        self.node_index = node_index
        self.preempted_for: dict[str, list[RunningJob]] = {}
        for r in self.jobs.values():
            if r.preempting and r.preempted_by:
                self.preempted_for.setdefault(r.preempted_by, []).append(r)
        self._by_vc: dict[str, list[RunningJob]] | None = None
        self._on_node: dict[int, list[RunningJob]] | None = None

    def _nodes(self, job: RunningJob) -> list[int]:
        index = self.node_index
        return [index[n] for n in dict.fromkeys(node for _, node in job.tasks) if n in index]

    def by_vc(self, vc: str) -> list[RunningJob]:
        """The VC's running jobs that are not being stopped, in victim order."""
        if self._by_vc is None:
            self._by_vc = {}
            for r in sorted(self.jobs.values(), key=victim_order):
                if not r.preempting:
                    self._by_vc.setdefault(r.vc, []).append(r)
        return self._by_vc.get(vc, [])

    def on_node(self, i: int) -> list[RunningJob]:
        """Jobs with a task on node ``i``: those being stopped first, then in victim order."""
        if self._on_node is None:
            self._on_node = {}
            for r in sorted(self.jobs.values(), key=_node_order):
                for n in self._nodes(r):
                    self._on_node.setdefault(n, []).append(r)
        return self._on_node.get(i, [])

    def in_flight_for(self, job: str) -> list[RunningJob]:
        return self.preempted_for.get(job, [])

    # ---- changes -------------------------------------------------------------------------------------------

    def add(self, job: RunningJob) -> None:
        self.jobs[job.key] = job
        if job.preempting and job.preempted_by:
            self.preempted_for.setdefault(job.preempted_by, []).append(job)
        if self._by_vc is not None and not job.preempting:
            insort(self._by_vc.setdefault(job.vc, []), job, key=victim_order)
        if self._on_node is not None:
            for n in self._nodes(job):
                insort(self._on_node.setdefault(n, []), job, key=_node_order)

    def remove(self, key: str) -> RunningJob | None:
        job = self.jobs.pop(key, None)
        if job is None:
            return None
        if job.preempting and job.preempted_by:
            mine = self.preempted_for.get(job.preempted_by, [])
            self.preempted_for[job.preempted_by] = [r for r in mine if r.key != key]
            if not self.preempted_for[job.preempted_by]:
                del self.preempted_for[job.preempted_by]
        if self._by_vc is not None and not job.preempting:
            self._by_vc[job.vc] = [r for r in self._by_vc.get(job.vc, []) if r.key != key]
        if self._on_node is not None:
            for n in self._nodes(job):
                self._on_node[n] = [r for r in self._on_node.get(n, []) if r.key != key]
        return job
