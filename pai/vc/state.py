"""What a scheduling pass starts from: free capacity per node, usage per VC, the running jobs indexed as victims.

``schedule`` builds one per snapshot; ``IncrementalScheduler`` keeps one between passes and applies changes."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from pai.domain.resources import ZERO, Resources
from pai.vc.capacity import NodePool
from pai.vc.explain import explain_never_fits
from pai.vc.gang import Gang, takes_whole_nodes
from pai.vc.ledger import VcLedger
from pai.vc.node_lending import NodeLending
from pai.vc.placement import place, release
from pai.vc.policy import SchedulerConfig
from pai.vc.quota import cluster_total, effective_quotas
from pai.vc.shrink_index import Split
from pai.vc.snapshot import PendingJob, RunningJob, Snapshot, TaskRequest, WaitingReason
from pai.vc.victims import VictimIndex, pinned

UNLIMITED = Resources(10**15, 10**15, 10**18)


class State:
    def __init__(self, snap: Snapshot) -> None:
        self.nodes = snap.nodes
        self.cfg: SchedulerConfig = snap.config
        self.pool = NodePool(snap.nodes)
        self.total = cluster_total(snap.nodes)
        self.vcs = {q.name: VcLedger(q, q.max if q.max is not None else UNLIMITED)
                    for q in effective_quotas(snap.vcs, self.total)}
        self.lenders = [v for v in self.vcs.values() if v.quota.lending_limit is not None]
        self.used_all = ZERO  # what the schedulable nodes use, plus what passes admit and plan
        for n in snap.nodes:
            if n.schedulable:
                self.used_all = self.used_all + n.used
        # (a function of the configuration, not a bound method: the index must not hold the State in a cycle, which
        # only the collector would free, and a pass's worth of objects would wait for it)
        self.index = VictimIndex(snap.running, self.pool.index,
                                 partial(holds_whole_nodes, cluster_rule=self.cfg.whole_nodes_for_multi_node_gpu))
        for job in snap.running:
            self._count(job, on_nodes=False)
        limit = self.cfg.node_lending_limit  # borrowed work per node (None: no per-node limit, nothing counted)
        self.lending = None if limit is None else NodeLending.of(limit, self.pool, self.vcs, self.index)
        self.gangs: dict[str, Gang] = {}
        self._shapes: dict[tuple[tuple[TaskRequest, ...], bool], Gang] = {}
        self._empty: NodePool | None = None
        self._never: dict[object, WaitingReason | None] = {}
        # the shrink search's view of each running elastic job it read, by key: its split (made when first read,
        # again when the job changed: pai.vc.shrink_index)
        self.shrink_parts: dict[str, Split] = {}

    def gang(self, job: PendingJob) -> Gang:
        # an elastic job is seen at its asked size and at its minimum under one key: by its tasks only
        g = None if job.elastic else self.gangs.get(job.key)
        if g is None:
            shape = (job.tasks, job.whole_nodes)
            g = self._shapes.get(shape)  # jobs of equal tasks share one Gang
            if g is None:
                if len(self._shapes) > 10_000:
                    self._shapes.clear()
                g = self._shapes[shape] = Gang.of(job.tasks, self.cfg.whole_nodes_for_multi_node_gpu,
                                                  whole_nodes=job.whole_nodes)
            if not job.elastic:
                self.gangs[job.key] = g
        return g

    def never_fits(self, gang: Gang) -> WaitingReason | None:
        """Why the gang could not fit even on the empty cluster, or None."""
        if gang.key not in self._never:
            if self._empty is None:
                self._empty = NodePool(self.nodes, empty=True)
            taken = place(self._empty, gang, "", 0)
            self._never[gang.key] = explain_never_fits(self._empty, gang) if taken is None else None
            if taken is not None:
                release(self._empty, taken)
        return self._never[gang.key]

    def exclusive(self, job: RunningJob) -> bool:
        """Does the running job hold whole nodes (asked for, or by the cluster rule)?"""
        return holds_whole_nodes(job, self.cfg.whole_nodes_for_multi_node_gpu)

    def _count(self, job: RunningJob, *, on_nodes: bool) -> None:
        """Add a running job's usage; ``on_nodes``: also take its resources and ports on the nodes (NodeView.used
        and free_ports of a snapshot already have them)."""
        exclusive = self.exclusive(job)
        for task, node in job.tasks:
            i = self.pool.index.get(node)
            if i is None:
                continue
            if on_nodes:
                r = task.resources
                self.pool.take(i, r.gpu, r.cpu, r.memory_mb, task.ports)
                if self.nodes[i].schedulable:
                    self.used_all = self.used_all + r
            else:
                self.pool.tasks_on[i] += 1
            if exclusive:
                self.pool.add_whole(i, 1)
        if not job.preemptible:
            self._pin(job, 1)
        vc = self.vcs.get(job.vc)
        if vc is not None:
            vc.add(job.user, job.request)
            if job.preempting:
                vc.mark_leaving(job.request)

    def _pin(self, job: RunningJob, step: int) -> None:
        """Count (step 1) or uncount (-1) the tasks of non-preemptible work on their nodes."""
        if pinned(job):
            for _, node in job.tasks:
                i = self.pool.index.get(node)
                if i is not None:
                    self.pool.pinned[i] += step

    # ---- changes between passes (IncrementalScheduler) ------------------------------------------------------

    def started(self, job: RunningJob) -> None:
        """A job admitted by a pass now runs: its capacity and VC usage were already taken by the pass."""
        self.index.add(job)
        self._lent(job.vc)
        self._pin(job, 1)
        if self.exclusive(job):  # the pass closed its nodes when it placed it
            for _, node in job.tasks:
                i = self.pool.index[node]
                self.pool.whole[i] = self.pool.whole.get(i, 0) + 1

    def grew(self, job: RunningJob, placed: tuple[tuple[TaskRequest, str], ...]) -> RunningJob:
        """A pass placed more tasks of a running non-gang job (pai.vc.nongang); their capacity and VC usage were
        already taken by the pass. Returns the job with all its placed tasks."""
        grown = replace(job, tasks=job.tasks + placed)
        self._reindex(grown)
        self._lent(job.vc)
        if self.exclusive(grown):  # the pass closed their nodes when it placed them
            for _, node in placed:
                i = self.pool.index[node]
                self.pool.whole[i] = self.pool.whole.get(i, 0) + 1
        return grown

    def added(self, job: RunningJob) -> None:
        """A job runs that no pass admitted (the launcher followed it from the store): take what it holds."""
        self._count(job, on_nodes=True)
        self.index.add(job)
        self._lent(job.vc)

    def replaced(self, job: RunningJob) -> None:
        """A running job's record changed (its start time, say), not what it holds nor whether it is leaving."""
        self._reindex(job)
        self._lent(job.vc)  # its place in victim order, so which of its VC's jobs borrow, may change

    def preempting(self, job: RunningJob) -> None:
        """A victim chosen by a pass is being stopped (its VC already counts it as leaving)."""
        self._reindex(job)
        self._lent(job.vc)

    def _lent(self, vc: str) -> None:
        """The VC's running jobs changed: which of them borrow is computed again before the next pass."""
        if self.lending is not None:
            self.lending.dirty.add(vc)

    def _reindex(self, job: RunningJob) -> None:
        old = self.index.remove(job.key)
        if old is not None:
            self._pin(old, -1)
        self.index.add(job)
        self._pin(job, 1)

    def finished(self, key: str) -> RunningJob | None:
        """A running job exited: its capacity and VC usage are free."""
        job = self.index.remove(key)
        if job is None:
            return None
        self._pin(job, -1)
        self._lent(job.vc)
        exclusive = self.exclusive(job)
        for task, node in job.tasks:
            i = self.pool.index.get(node)
            if i is not None:
                r = task.resources
                self.pool.give(i, r.gpu, r.cpu, r.memory_mb, task.ports)
                if exclusive:
                    self.pool.add_whole(i, -1)
                if self.nodes[i].schedulable:
                    self.used_all = self.used_all - r
        vc = self.vcs.get(job.vc)
        if vc is not None:
            vc.remove(job.user, job.request)
            if job.preempting:
                vc.unmark_leaving(job.request)
        return job


def holds_whole_nodes(job: RunningJob, cluster_rule: bool) -> bool:
    """Does the running job hold whole nodes: asked for, or by the cluster rule (``wholeNodesForMultiNodeGpu``)?"""
    if job.whole_nodes or not cluster_rule:  # the common case: no count needed
        return job.whole_nodes
    gpu_tasks = sum(1 for t, _ in job.tasks if t.resources.gpu) if job.gang else 0  # non-gang: task by task
    return takes_whole_nodes(job.whole_nodes, gpu_tasks, cluster_rule)
