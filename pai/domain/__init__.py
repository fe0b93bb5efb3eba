"""Pure model of pai: resources, job specs, jobs, tasks, nodes, states and errors (stdlib only)."""

from pai.domain.errors import (
    ConflictJobError,
    ForbiddenUserError,
    InvalidParametersError,
    InvalidProtocolError,
    InvalidTransitionError,
    NoJobError,
    NoNodeError,
    NoUserError,
    NoVirtualClusterError,
    PaiError,
    UnauthorizedUserError,
)
from pai.domain.job import Job, Task
from pai.domain.jobspec import JobSpec, PortSpec, TaskRoleSpec
from pai.domain.node import Node, NodeState
from pai.domain.resources import Resources
from pai.domain.states import JobState, TaskState

__all__ = [
    "ConflictJobError",
    "ForbiddenUserError",
    "InvalidParametersError",
    "InvalidProtocolError",
    "InvalidTransitionError",
    "Job",
    "JobSpec",
    "JobState",
    "NoJobError",
    "NoNodeError",
    "NoUserError",
    "NoVirtualClusterError",
    "Node",
    "NodeState",
    "PaiError",
    "PortSpec",
    "Resources",
    "Task",
    "TaskRoleSpec",
    "TaskState",
    "UnauthorizedUserError",
]
