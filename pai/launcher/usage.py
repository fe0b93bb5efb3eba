"""What the cluster's capacity is used by: each VC's usage (now, and sampled over time for the dashboard's chart) and
the tasks on each node.

``UsageSampler.sample`` runs on the writer thread every ``SAMPLE_SECONDS`` (``LauncherLoop``): one row per VC, its
usage taken from the active jobs the scheduler follows in memory (``Scheduling.jobs``, up to date after every pass),
so a sample reads a few rows (nodes, the configuration), never the job table; samples older than ``KEEP_SECONDS`` are
pruned in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pai.domain.errors import NoVirtualClusterError
from pai.domain.job import Job
from pai.domain.node import Node
from pai.domain.resources import ZERO, Resources
from pai.domain.states import JobState, TaskState
from pai.launcher import cluster
from pai.store import nodes as store_nodes
from pai.store import stats
from pai.store.db import Database
from pai.store.stats import VcUsageSample

SAMPLE_SECONDS = 60.0
KEEP_SECONDS = 3 * 24 * 3600.0
MAX_HOURS = 72  # the longest history one request asks for: what is kept


@dataclass(frozen=True, slots=True)
class VcUsage:
    used: Resources = ZERO  # what the VC's running jobs hold
    running: int = 0  # its RUNNING and STOPPING jobs
    waiting: int = 0


def usage_by_vc(jobs: Iterable[Job], vcs: Iterable[str]) -> dict[str, VcUsage]:
    """The usage of each of ``vcs`` by the active ``jobs`` (those of other VCs are left out)."""
    used = {vc: ZERO for vc in vcs}
    running = dict.fromkeys(used, 0)
    waiting = dict.fromkeys(used, 0)
    for job in jobs:
        if job.vc not in used or not job.state.is_active():
            continue
        if job.state is JobState.WAITING:
            waiting[job.vc] += 1
            continue
        running[job.vc] += 1
        for t in job.tasks:
            if t.holds_node():
                used[job.vc] = used[job.vc] + job.spec.role(t.role).resources
    return {vc: VcUsage(used[vc], running[vc], waiting[vc]) for vc in used}


@dataclass(frozen=True, slots=True)
class PlacedTask:
    """A task that holds resources on a node."""

    job: str  # user~name
    role: str
    index: int
    state: TaskState
    gpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NodeReport:
    node: Node
    used: Resources
    tasks: tuple[PlacedTask, ...]

    @property
    def used_gpus(self) -> list[int]:
        return sorted({g for t in self.tasks for g in t.gpus})


def node_reports(nodes: Iterable[Node], jobs: Iterable[Job]) -> list[NodeReport]:
    """Each node with what the active tasks of ``jobs`` hold on it, and those tasks."""
    nodes = list(nodes)
    used = {n.name: ZERO for n in nodes}
    tasks: dict[str, list[PlacedTask]] = {n.name: [] for n in nodes}
    for job in jobs:
        for t in job.tasks:
            if t.holds_node() and t.node in used:
                used[t.node] = used[t.node] + job.spec.role(t.role).resources
                tasks[t.node].append(PlacedTask(job.key, t.role, t.index, t.state, t.gpus))
    return [NodeReport(n, used[n.name], tuple(tasks[n.name])) for n in nodes]


class UsageSampler:
    def __init__(self, db: Database, clock: Callable[[], float], clusters: cluster.ClusterCache,
                 active_jobs: Callable[[], Iterable[Job]]) -> None:
        """``active_jobs``: the active jobs as the scheduler follows them (read on the writer thread)."""
        self.db = db
        self.clock = clock
        self.clusters = clusters
        self.active_jobs = active_jobs

    def sample(self) -> list[VcUsageSample]:
        """Store a sample of every VC now, and drop those older than ``KEEP_SECONDS`` (on the writer thread)."""
        now = self.clock()
        with self.db.session() as s:
            total = cluster.cluster_total(store_nodes.list_nodes(s))
            quotas = cluster.quotas(self.clusters.get(s), total)
            usage = usage_by_vc(self.active_jobs(), [q.name for q in quotas])
            samples = [VcUsageSample(q.name, now, usage[q.name].used, q.guaranteed, _capped(q.max, total),
                                     usage[q.name].running, usage[q.name].waiting) for q in quotas]
            stats.add_samples(s, samples)
            stats.prune_samples(s, now - KEEP_SECONDS)
        return samples

    def history(self, vc: str, hours: int) -> list[VcUsageSample]:
        """The samples of ``vc`` over the last ``hours``, oldest first. Raises NoVirtualClusterError."""
        with self.db.session() as s:
            if self.clusters.get(s).vc_status(vc) is None:
                raise NoVirtualClusterError(f"virtual cluster {vc} not found")
            return stats.samples_of(s, vc, self.clock() - hours * 3600.0)


def _capped(r: Resources | None, total: Resources) -> Resources:
    if r is None:
        return total
    return Resources(min(r.gpu, total.gpu), min(r.cpu, total.cpu), min(r.memory_mb, total.memory_mb))
