"""Pure model of pai: resources, job specs, jobs, tasks, nodes, states and errors (stdlib only).

The errors and the states are imported with the package; the jobs, specs, nodes and resources when first named
(PEP 562): the CLI names states and its SSH keys' checks, and does not wait for the rest.
"""

from typing import TYPE_CHECKING

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
from pai.domain.states import JobState, TaskState

if TYPE_CHECKING:
    from pai.domain.job import Job, Task
    from pai.domain.jobspec import JobSpec, PortSpec, TaskRoleSpec
    from pai.domain.node import Node, NodeState
    from pai.domain.resources import Resources

_LAZY = {"Job": "job", "Task": "job", "JobSpec": "jobspec", "PortSpec": "jobspec", "TaskRoleSpec": "jobspec",
         "Node": "node", "NodeState": "node", "Resources": "resources"}

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


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
