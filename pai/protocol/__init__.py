"""Agent <-> master messages: the only definition, imported by both sides.

Transport: the agent POSTs ``RegisterRequest`` to ``/api/internal/agents/register`` once per
(re)connect and ``HeartbeatRequest`` to ``/api/internal/agents/{node}/heartbeat`` every interval;
each answer is a ``MasterReply`` carrying the commands for that node. Every message carries
``version``; the master refuses a version it does not speak.
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
    ProtocolError,
    RegisterRequest,
    RegistryCredentials,
    StartTask,
    StopTask,
    VolumeMount,
)

__all__ = [
    "PROTOCOL_VERSION",
    "ContainerReport",
    "ContainerStatus",
    "GpuHealth",
    "HeartbeatRequest",
    "MasterReply",
    "NodeInfo",
    "PlatformExit",
    "ProtocolError",
    "RegisterRequest",
    "RegistryCredentials",
    "StartTask",
    "StopTask",
    "VolumeMount",
]
