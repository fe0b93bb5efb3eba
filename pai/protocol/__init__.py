"""Agent <-> master messages: the only definition, imported by both sides.

Transport: the agent POSTs ``RegisterRequest`` to ``/api/internal/agents/register`` once per
(re)connect and ``HeartbeatRequest`` to ``/api/internal/agents/{node}/heartbeat`` every interval, at once
when one of its attempts starts or ends, and at once when the master pokes it; each answer is a
``MasterReply`` carrying the commands for that node. The agent also keeps a WebSocket open at
``/api/internal/agents/{node}/channel``, over which the master sends a ``Poke`` whenever a task of the
node changed (bound, to be stopped). Every message carries ``version``; the master refuses a version it
does not speak. Fields are added with a default that old peers' messages mean (see ``messages``).

Fencing (ADR 0001): every reply and every poke carries the launcher's ``epoch``; an agent refuses the
commands of an epoch lower than the highest it has seen (``pai.nodeagent.epoch``).
"""

from pai.protocol.exitcodes import PlatformExit
from pai.protocol.messages import (
    PROTOCOL_VERSION,
    ContainerReport,
    ContainerStatus,
    GpuHealth,
    HeartbeatRequest,
    MasterReply,
    NodeInfo,
    Poke,
    ProtocolError,
    RegisterRequest,
    RegistryCredentials,
    StartTask,
    StopTask,
    VolumeMount,
)
from pai.protocol.ssh import SshAccess, SshHost

__all__ = [
    "PROTOCOL_VERSION",
    "ContainerReport",
    "ContainerStatus",
    "GpuHealth",
    "HeartbeatRequest",
    "MasterReply",
    "NodeInfo",
    "PlatformExit",
    "Poke",
    "ProtocolError",
    "RegisterRequest",
    "RegistryCredentials",
    "SshAccess",
    "SshHost",
    "StartTask",
    "StopTask",
    "VolumeMount",
]
