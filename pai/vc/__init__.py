"""The scheduler: a pure function of a snapshot. No I/O, no asyncio, no clock (``now`` is an input)."""

from pai.vc.schedule import schedule
from pai.vc.snapshot import (
    Admission,
    Decision,
    NodeView,
    PendingJob,
    Placement,
    Preemption,
    RunningJob,
    Snapshot,
    TaskRequest,
    VcQuota,
    WaitingReason,
)

__all__ = [
    "Admission",
    "Decision",
    "NodeView",
    "PendingJob",
    "Placement",
    "Preemption",
    "RunningJob",
    "Snapshot",
    "TaskRequest",
    "VcQuota",
    "WaitingReason",
    "schedule",
]
