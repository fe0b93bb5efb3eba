"""Reconcile one node: what its agent reports against what the master expects there (pure).

Level-triggered, so a lost reply, a repeated report or a restart of either side converges: an expected
attempt the agent does not have is (re)started if it never ran, declared lost if it did; an attempt the
agent runs that the master does not expect is stopped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from pai.domain.job import Job, Task
from pai.domain.states import JobState, TaskState
from pai.launcher.lifecycle import Event, Exited, Started
from pai.protocol.exitcodes import PlatformExit
from pai.protocol.messages import ContainerReport, ContainerStatus, StopTask


@dataclass(frozen=True, slots=True)
class NodePlan:
    events: list[tuple[str, Event]]  # (job id, event)
    stops: list[StopTask]


def reconcile(
    reports: tuple[ContainerReport, ...],
    expected: dict[str, tuple[Job, Task]],
    now: float,
    grace_seconds: float,
) -> NodePlan:
    """``expected``: the live attempts placed on this node, by attempt id."""
    events: list[tuple[str, Event]] = []
    stops: list[StopTask] = []
    seen: set[str] = set()
    for r in reports:
        seen.add(r.attempt_id)
        hit = expected.get(r.attempt_id)
        if hit is None:
            if r.status is ContainerStatus.RUNNING:
                stops.append(StopTask(r.attempt_id, grace_seconds, int(PlatformExit.STOPPED), "unknown to the master"))
            continue
        job, task = hit
        if r.status is ContainerStatus.RUNNING:
            if task.state is TaskState.WAITING:
                events.append((job.id, Started(r.started_at or now, r.attempt_id)))
            elif task.state is TaskState.STOPPING:
                code = task.exit_code if task.exit_code is not None else int(PlatformExit.STOPPED)
                stops.append(StopTask(r.attempt_id, grace_seconds, code, task.exit_reason or "stopped"))
        else:
            code = r.exit_code if r.exit_code is not None else int(PlatformExit.UNKNOWN)
            events.append((job.id, Exited(r.finished_at or now, r.attempt_id, code, r.reason)))
    for attempt_id, (job, task) in expected.items():
        if attempt_id in seen:
            continue
        if task.state is TaskState.RUNNING:
            events.append((job.id, Exited(now, attempt_id, int(PlatformExit.CONTAINER_LOST), "the agent lost it")))
        elif task.state is TaskState.STOPPING:
            code = task.exit_code if task.exit_code is not None else int(PlatformExit.STOPPED)
            events.append((job.id, Exited(now, attempt_id, code, task.exit_reason)))
    return NodePlan(events, stops)


def pending_starts(node: str, jobs: list[Job], reported: set[str]) -> list[tuple[Job, Task]]:
    """Attempts placed on ``node`` that should run there and that its agent does not have yet."""
    return [
        (j, t)
        for j in jobs
        if j.state is JobState.RUNNING
        for t in j.tasks
        if t.node == node and t.state is TaskState.WAITING and t.attempt_id and t.attempt_id not in reported
    ]


@dataclass
class NodeJobs:
    """The active jobs with a task on some nodes, by node, as the heartbeats of one transaction change them (a job
    on two of the nodes: the second node's heartbeat sees what the first one changed)."""

    by_id: dict[str, Job] = field(default_factory=dict)
    on: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # node -> job ids
    changed: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, jobs: Iterable[Job]) -> NodeJobs:
        out = cls()
        for job in jobs:
            out.by_id[job.id] = job
            for node in {t.node for t in job.tasks if t.node}:
                out.on[node].append(job.id)
        return out

    def jobs_on(self, node: str) -> list[Job]:
        return [self.by_id[i] for i in self.on.get(node, ())]

    def update(self, job: Job) -> None:
        self.by_id[job.id] = job
        self.changed.add(job.id)
