"""Build the scheduler's snapshot from domain values (pure).

An elastic job is handed over with its roles' ranges and its last resize; the tasks a shrink is stopping (-402)
are no longer its own: they form a job of their own (``leaving``, key ``<job>\\x1fleaving``) whose capacity is
freed as they exit, as a preempted job's is, so that no pass shrinks the job for them again.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import replace

from pai.domain.job import Job, Task
from pai.domain.node import Node, NodeState
from pai.domain.resources import Resources
from pai.domain.states import JobState, TaskState
from pai.launcher.cluster import Cluster
from pai.launcher.lifecycle import shrinking
from pai.protocol.exitcodes import PlatformExit
from pai.vc import NodeView, PendingJob, RunningJob, Snapshot, TaskRequest, VcQuota, WaitingReason
from pai.vc.policy import DEFAULT_CONFIG, SchedulerConfig
from pai.vc.snapshot import ElasticRole


def usage_by_node(nodes: Iterable[Node], jobs: Iterable[Job]) -> dict[str, Resources]:
    """What the active tasks of ``jobs`` hold on each node (waiting jobs hold nothing)."""
    used = {n.name: Resources() for n in nodes}
    for job in jobs:
        for t in job.tasks:
            if t.holds_node() and t.node in used:
                used[t.node] = used[t.node] + job.spec.role(t.role).resources
    return used


def _request(job: Job, t: Task) -> TaskRequest:
    role = job.spec.role(t.role)
    return TaskRequest(
        role=t.role,
        index=t.index,
        resources=role.resources,
        gpu_type=role.gpu_type or job.spec.gpu_type,
        ports=sum(p.count for p in role.all_ports()),
        node_selector=tuple(sorted(role.node_selector.items())),
    )


def hold_back(jobs: Iterable[Job], clu: Cluster) -> tuple[set[str], dict[str, WaitingReason]]:
    """Work the scheduler must not place because its VC is stopped, or gone: waiting jobs, and the waiting tasks of
    a running non-gang job (its running part stays: see build_snapshot's ``held``). Each gets its reason."""
    held: set[str] = set()
    reasons: dict[str, WaitingReason] = {}
    for job in jobs:
        if job.state is not JobState.WAITING and unplaced(job) is None:
            continue
        status = clu.vc_status(job.vc)
        if status is None:
            held.add(job.key)
            reasons[job.key] = WaitingReason("VcMissing", f"VC `{job.vc}` no longer exists; stop the job or "
                                             "ask an admin to recreate the VC", figures={"vc": job.vc})
        elif not status.admits_jobs():
            held.add(job.key)
            reasons[job.key] = WaitingReason("VcStopped", f"VC `{job.vc}` is {status.value}; its jobs wait until an "
                                             "admin sets it running", figures={"vc": job.vc})
    return held, reasons


def _expected(job: Job, typical: float | None) -> tuple[float | None, bool]:
    """How long the job should run, and whether that is a typical run time: as declared, else ``typical`` (its
    user's jobs' in its VC), else unknown."""
    declared = job.spec.expected_seconds
    return (declared, False) if declared is not None or typical is None else (typical, True)


LEAVING = "\x1fleaving"


def elastic_roles(job: Job) -> tuple[ElasticRole, ...]:
    """The job's roles that may grow and shrink (``extras.elastic`` with minInstances < maxInstances)."""
    return tuple(ElasticRole(r.name, r.elastic.min_instances, r.elastic.max_instances)
                 for r in job.spec.task_roles if r.elastic is not None and r.elastic.resizable)


def as_pending(job: Job, typical: float | None = None) -> PendingJob:
    """A WAITING job as the scheduler sees it (``typical``: the typical run time of its user's jobs in its VC,
    carried to it once it runs)."""
    seconds, is_typical = _expected(job, typical)
    return PendingJob(key=job.key, vc=job.vc, user=job.user, priority=job.spec.priority,
                      submitted_at=job.submitted_at, tasks=tuple(_request(job, t) for t in job.tasks),
                      preemptible=job.spec.preemptible, gang=job.spec.gang, whole_nodes=job.spec.whole_nodes,
                      expected_seconds=seconds, expected_typical=is_typical, elastic=elastic_roles(job))


def unplaced(job: Job) -> PendingJob | None:
    """The tasks of a RUNNING non-gang job (``gangAllocation: false``) that wait for a node, as the scheduler sees
    them: a pending job of the same key beside its running part. None for any other job, and for one being
    stopped, preempted or completed (a task STOPPING): then what waits is dropped, or requeued with the job."""
    if job.spec.gang or job.state is not JobState.RUNNING or job.preempted_by:
        return None
    waiting = [t for t in job.tasks if t.node is None and t.state is TaskState.WAITING]
    if not waiting or any(t.state is TaskState.STOPPING for t in job.tasks):
        return None
    return replace(as_pending(job), tasks=tuple(_request(job, t) for t in waiting))


def as_running(job: Job, typical: float | None = None) -> RunningJob | None:
    """A RUNNING or STOPPING job as the scheduler sees it: what its tasks hold, whether it is leaving (being
    stopped, or its tasks preempted), and how long it should run (``typical``: as as_pending); None when no task
    holds anything."""
    held = [t for t in job.tasks if t.holds_node() and not shrinking(t)]
    if not held:
        return None
    seconds, is_typical = _expected(job, typical)
    preempting = job.state is JobState.STOPPING or any(
        t.state is TaskState.STOPPING and t.exit_code == PlatformExit.PREEMPTED for t in held
    )
    return RunningJob(key=job.key, vc=job.vc, user=job.user, priority=job.spec.priority,
                      started_at=job.started_at or job.submitted_at,
                      tasks=tuple((_request(job, t), t.node or "") for t in held),
                      preempting=preempting, preempted_by=job.preempted_by or "", preemptible=job.spec.preemptible,
                      gang=job.spec.gang, whole_nodes=job.spec.whole_nodes, expected_seconds=seconds,
                      expected_typical=is_typical, elastic=elastic_roles(job), last_resized_at=job.last_resized_at)


def leaving(job: Job) -> RunningJob | None:
    """The tasks of an elastic job that a shrink is stopping, as a job being preempted for nobody in particular
    (any waiting job may plan behind them); None when none is left."""
    gone = [t for t in job.tasks if t.holds_node() and shrinking(t)]
    if not gone:
        return None
    return RunningJob(key=job.key + LEAVING, vc=job.vc, user=job.user, priority=job.spec.priority,
                      started_at=job.started_at or job.submitted_at,
                      tasks=tuple((_request(job, t), t.node or "") for t in gone), preempting=True,
                      preemptible=job.spec.preemptible, gang=job.spec.gang, whole_nodes=job.spec.whole_nodes)


def build_snapshot(
    now: float,
    nodes: Iterable[Node],
    jobs: Iterable[Job],
    vcs: tuple[VcQuota, ...],
    config: SchedulerConfig = DEFAULT_CONFIG,
    typical: Callable[[Job], float | None] = lambda job: None,
    held: Collection[str] = (),
) -> Snapshot:
    """``typical``: the typical run time of a job's user's jobs in its VC (see as_pending); ``held``: jobs whose
    waiting work the scheduler must not see (hold_back): a waiting one is left out, a running one keeps only what
    it holds."""
    nodes = list(nodes)
    jobs = list(jobs)
    used = usage_by_node(nodes, jobs)
    ports_used: dict[str, int] = {n.name: 0 for n in nodes}
    running: list[RunningJob] = []
    pending: list[PendingJob] = []
    for job in jobs:
        if job.state is JobState.WAITING:
            if job.key not in held:
                pending.append(as_pending(job, typical(job)))
            continue
        if job.key not in held and (rest := unplaced(job)) is not None:
            pending.append(rest)
        if (gone := leaving(job)) is not None:
            running.append(gone)
        form = as_running(job, typical(job))
        if form is None:
            continue
        for t in job.tasks:
            if t.holds_node() and t.node in ports_used:
                ports_used[t.node] += sum(len(p) for p in t.ports.values())
        running.append(form)
    views = tuple(
        NodeView(
            name=n.name,
            total=Resources(n.total.gpu - len(n.failed_gpus), n.total.cpu, n.total.memory_mb),
            used=used[n.name],
            gpu_type=n.gpu_type,
            labels=dict(n.labels),
            schedulable=n.schedulable(),
            free_ports=(n.port_range[1] - n.port_range[0] + 1) - ports_used[n.name],
        )
        for n in nodes
    )
    return Snapshot(now=now, nodes=views, vcs=vcs, running=tuple(running), pending=tuple(pending), config=config)


def draining_victims(nodes: Iterable[Node], jobs: Iterable[Job]) -> list[Job]:
    """Running jobs with a task on a DRAINING node that are not already being stopped: they are moved off
    (stopped gracefully and requeued, not counted as a retry)."""
    draining = {n.name for n in nodes if n.state is NodeState.DRAINING}
    if not draining:
        return []
    return [
        j for j in jobs
        if j.state is JobState.RUNNING
        and any(t.holds_node() and t.node in draining and t.state is not TaskState.STOPPING for t in j.tasks)
    ]


def drain_message(job: Job, nodes: Iterable[Node]) -> str:
    draining = {n.name for n in nodes if n.state is NodeState.DRAINING}
    names = sorted({t.node for t in job.tasks if t.node in draining and t.node is not None})
    return f"node {', '.join(names)} is draining"
