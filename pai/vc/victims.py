"""Running jobs indexed for victim search: per node and per VC in victim order, and by whom they were preempted.

Built lazily (a pass that preempts nothing never pays for it) and kept up to date as jobs start, stop and are
preempted, so an incremental scheduler can reuse it across passes."""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable

from pai.vc.order import always_borrows
from pai.vc.snapshot import RunningJob

# a job's share of one node: (job, gpu, cpu, memory, tasks)
OnNode = tuple[RunningJob, int, int, int, int]


def victim_order(job: RunningJob) -> tuple[int, float, str]:
    """Lower priority first, then most recently started first."""
    return (job.priority, -job.started_at, job.key)


def pinned(job: RunningJob) -> bool:
    """Non-preemptible and not leaving: it holds its capacity until it ends."""
    return not job.preemptible and not job.preempting


def _node_order(job: RunningJob) -> tuple[bool, int, float, str]:
    """On a node: jobs already being stopped first, then victim order."""
    return (not job.preempting, *victim_order(job))


def _entry_order(entry: OnNode) -> tuple[bool, int, float, str]:
    return _node_order(entry[0])


def node_shares(job: RunningJob, node_index: dict[str, int]) -> dict[int, list[int]]:
    """Node index -> [gpu, cpu, memory, tasks] of the job on that node (nodes not in ``node_index`` left out)."""
    out: dict[int, list[int]] = {}
    for t, node in job.tasks:
        i = node_index.get(node)
        if i is not None:
            acc = out.setdefault(i, [0, 0, 0, 0])
            acc[0] += t.resources.gpu
            acc[1] += t.resources.cpu
            acc[2] += t.resources.memory_mb
            acc[3] += 1
    return out


def asks_whole_nodes(job: RunningJob) -> bool:
    return job.whole_nodes


class VictimIndex:
    """``whole``: does a running job hold whole nodes (State.exclusive: asked for, or by the cluster rule)?"""

    def __init__(self, running: Iterable[RunningJob], node_index: dict[str, int],
                 whole: Callable[[RunningJob], bool] = asks_whole_nodes) -> None:
        self.jobs = {r.key: r for r in running}
        self.node_index = node_index
        self.whole = whole
        self.preempted_for: dict[str, list[RunningJob]] = {}
        self.pinned = 0  # non-preemptible jobs that are not leaving: when 0, no search need say they hold anything
        self.oppo: dict[str, int] = {}  # VC -> its oppo jobs that are not leaving (work that always borrows)
        for r in self.jobs.values():
            if r.preempting:  # by the job it was stopped for; "" when not known
                self.preempted_for.setdefault(r.preempted_by, []).append(r)
            self._count(r, 1)
        self._by_vc: dict[str, list[RunningJob]] | None = None
        self._on_node: dict[int, list[OnNode]] | None = None

    def _shares(self, job: RunningJob) -> dict[int, list[int]]:
        return node_shares(job, self.node_index)

    def by_vc(self, vc: str) -> list[RunningJob]:
        """The VC's running jobs that are not being stopped, in victim order."""
        if self._by_vc is None:
            self._by_vc = {}
            for r in sorted(self.jobs.values(), key=victim_order):
                if not r.preempting:
                    self._by_vc.setdefault(r.vc, []).append(r)
        return self._by_vc.get(vc, [])

    def on_node(self, i: int) -> list[OnNode]:
        """Jobs with a task on node ``i`` and their share of it: jobs being stopped first, then victim order."""
        if self._on_node is None:
            self._on_node = {}
            for r in sorted(self.jobs.values(), key=_node_order):
                for n, (g, c, m, k) in self._shares(r).items():
                    self._on_node.setdefault(n, []).append((r, g, c, m, k))
        return self._on_node.get(i, [])

    def in_flight_for(self, job: str) -> list[RunningJob]:
        return self.preempted_for.get(job, []) if job else []

    def in_flight_for_nobody(self, pending: set[str]) -> list[RunningJob]:
        """Jobs being stopped for no job that still waits: whoever can use their capacity first gets it."""
        return [r for by, jobs in self.preempted_for.items() if by not in pending for r in jobs]

    # ---- changes -------------------------------------------------------------------------------------------

    def _count(self, job: RunningJob, step: int) -> None:
        if job.preempting:
            return
        if not job.preemptible:
            self.pinned += step
        if always_borrows(job.priority):
            self.oppo[job.vc] = self.oppo.get(job.vc, 0) + step

    def add(self, job: RunningJob) -> None:
        self.jobs[job.key] = job
        self._count(job, 1)
        if job.preempting:
            self.preempted_for.setdefault(job.preempted_by, []).append(job)
        if self._by_vc is not None and not job.preempting:
            insort(self._by_vc.setdefault(job.vc, []), job, key=victim_order)
        if self._on_node is not None:
            for n, (g, c, m, k) in self._shares(job).items():
                insort(self._on_node.setdefault(n, []), (job, g, c, m, k), key=_entry_order)

    def remove(self, key: str) -> RunningJob | None:
        job = self.jobs.pop(key, None)
        if job is None:
            return None
        self._count(job, -1)
        if job.preempting:
            mine = self.preempted_for.get(job.preempted_by, [])
            self.preempted_for[job.preempted_by] = [r for r in mine if r.key != key]
            if not self.preempted_for[job.preempted_by]:
                del self.preempted_for[job.preempted_by]
        if self._by_vc is not None and not job.preempting:
            self._by_vc[job.vc] = [r for r in self._by_vc.get(job.vc, []) if r.key != key]
        if self._on_node is not None:
            for n in self._shares(job):
                self._on_node[n] = [e for e in self._on_node.get(n, []) if e[0].key != key]
        return job
