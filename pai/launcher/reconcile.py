"""Reconcile one node: what its agent reports against what the master expects there (pure).

Level-triggered, so a lost reply, a repeated report or a restart of either side converges: an expected
attempt the agent does not have is (re)started if it never ran, declared lost if it did; an attempt the
agent runs that the master does not expect is stopped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from pai.domain.job import Job, Placement, Task
from pai.domain.states import JobState, TaskState
from pai.launcher.lifecycle import Event, Exited, Started
from pai.protocol.exitcodes import PlatformExit
from pai.protocol.messages import ContainerReport, ContainerStatus, StopTask


@dataclass(frozen=True, slots=True)
class NodePlan:
    events: list[tuple[str, Event]]  # (job id, event)
    stops: list[StopTask]


P = TypeVar("P", bound=Placement)


def reconcile(
    reports: tuple[ContainerReport, ...],
    expected: Mapping[str, tuple[Placement, Task]],
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


def pending_starts(node: str, jobs: Iterable[P], reported: set[str]) -> list[tuple[P, Task]]:
    """Attempts placed on ``node`` that should run there and that its agent does not have yet."""
    return [
        (j, t)
        for j in jobs
        if j.state is JobState.RUNNING
        for t in j.tasks
        if t.node == node and t.state is TaskState.WAITING and t.attempt_id and t.attempt_id not in reported
    ]


@dataclass(frozen=True, slots=True)
class Placed:
    """A job as the rows of its tasks on some nodes show it (``pai.store.jobs.tasks_on``), not decoded: what a node's
    heartbeat reads of a job it does not change, start or tell the members of."""

    id: str
    state: JobState
    # only those on the nodes read, by role name and index (a Job's: in its roles' order), and of each only what
    # reconciling reads: its state, node, attempt, exit code and reason (``tasks_on``)
    tasks: tuple[Task, ...]


@dataclass
class NodeJobs:
    """The active jobs with a task on some nodes, by node, as the heartbeats of one transaction see and change them:
    each as ``Placed`` until it is loaded whole (``load``), then as loaded and changed (a job on two of the nodes: the
    second node's heartbeat sees what the first one changed)."""

    placed: dict[str, Placed] = field(default_factory=dict)
    on: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # node -> job ids
    by_id: dict[str, Job] = field(default_factory=dict)  # the jobs loaded whole
    changed: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, rows: Iterable[tuple[str, JobState, Task]]) -> NodeJobs:
        """From ``tasks_on``'s rows: (job id, job state, task), a job's together."""
        states: dict[str, JobState] = {}
        tasks: dict[str, list[Task]] = defaultdict(list)
        seen: set[tuple[str, str]] = set()
        out = cls()
        for job_id, state, task in rows:
            states[job_id] = state
            tasks[job_id].append(task)
            if task.node and (task.node, job_id) not in seen:
                seen.add((task.node, job_id))
                out.on[task.node].append(job_id)
        out.placed = {i: Placed(i, st, tuple(tasks[i])) for i, st in states.items()}
        return out

    def jobs_on(self, node: str) -> list[Job | Placed]:
        return [self.by_id.get(i) or self.placed[i] for i in self.on.get(node, ())]

    def unloaded(self, ids: Collection[str]) -> set[str]:
        return {i for i in ids if i not in self.by_id}

    def load(self, asked: Collection[str], jobs: Iterable[Job]) -> None:
        """The jobs of ``asked`` as loaded whole: from now on, what they are here (one deleted since its tasks were
        read is no longer on any node)."""
        for job in jobs:
            self.by_id.setdefault(job.id, job)
        for gone in set(asked) - self.by_id.keys():
            self.placed.pop(gone, None)
            for ids in self.on.values():
                if gone in ids:
                    ids.remove(gone)

    def update(self, job: Job) -> None:
        self.by_id[job.id] = job
        self.changed.add(job.id)
