"""Job and task states and the table of allowed transitions (OpenPAI's state names)."""

from __future__ import annotations

from enum import StrEnum

from pai.domain.errors import InvalidTransitionError


class JobState(StrEnum):
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    def is_terminal(self) -> bool:
        return self in _TERMINAL_JOB

    def is_active(self) -> bool:
        """Not ended yet: waiting, running or being stopped. What the scheduler follows, what a node's heartbeat is
        reconciled against, what keeps a VC from being removed. A WAITING job counts: it is queued, and one just
        requeued may still have tasks STOPPING on their nodes."""
        return not self.is_terminal()

    def to(self, new: JobState) -> JobState:
        if new is self:
            return self
        if new not in JOB_TRANSITIONS[self]:
            raise InvalidTransitionError("job", self.value, new.value)
        return new


class TaskState(StrEnum):
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    def is_terminal(self) -> bool:
        return self in _TERMINAL_TASK

    def holds_node(self) -> bool:
        """A task in this state that has been placed holds its node's resources (GPUs, ports, CPU, memory): from its
        placement (WAITING for its start), while it runs, and while it is being stopped, until its container is gone
        (see ``Task.holds_node``)."""
        return self in _HOLDING_TASK

    def to(self, new: TaskState) -> TaskState:
        if new is self:
            return self
        if new not in TASK_TRANSITIONS[self]:
            raise InvalidTransitionError("task", self.value, new.value)
        return new


_TERMINAL_JOB = frozenset({JobState.STOPPED, JobState.SUCCEEDED, JobState.FAILED})
_TERMINAL_TASK = frozenset({TaskState.STOPPED, TaskState.SUCCEEDED, TaskState.FAILED})
_HOLDING_TASK = frozenset({TaskState.WAITING, TaskState.RUNNING, TaskState.STOPPING})

J = JobState
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    # WAITING -> FAILED: a job that can never start (e.g. its spec asks what no VC allows).
    J.WAITING: frozenset({J.RUNNING, J.STOPPING, J.STOPPED, J.FAILED}),
    # RUNNING -> WAITING: a retried or preempted attempt goes back to the queue.
    J.RUNNING: frozenset({J.WAITING, J.STOPPING, J.SUCCEEDED, J.FAILED}),
    J.STOPPING: frozenset({J.STOPPED}),
    J.STOPPED: frozenset(),
    J.SUCCEEDED: frozenset(),
    J.FAILED: frozenset(),
}

T = TaskState
TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    # WAITING -> SUCCEEDED/FAILED: the container ran and exited between two reports.
    T.WAITING: frozenset({T.RUNNING, T.STOPPING, T.STOPPED, T.SUCCEEDED, T.FAILED}),
    # RUNNING -> WAITING: the task is retried (or its job requeued) after the attempt ended.
    T.RUNNING: frozenset({T.WAITING, T.STOPPING, T.SUCCEEDED, T.FAILED}),
    # STOPPING -> WAITING: a preempted task goes back to the queue once its container is gone.
    T.STOPPING: frozenset({T.STOPPED, T.WAITING}),
    # Terminal tasks restart only when the whole job is retried.
    T.STOPPED: frozenset({T.WAITING}),
    T.SUCCEEDED: frozenset({T.WAITING}),
    T.FAILED: frozenset({T.WAITING}),
}
