"""The scheduler: a pure function of a snapshot. No I/O, no asyncio, no clock (``now`` is an input)."""

from pai.vc.incremental import IncrementalScheduler
from pai.vc.policy import PreemptionPolicy, Reclaim, SchedulerConfig, WhileBorrowing, WithinVc
from pai.vc.reasons import WaitCode
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
    "IncrementalScheduler",
    "NodeView",
    "PendingJob",
    "Placement",
    "Preemption",
    "PreemptionPolicy",
    "Reclaim",
    "RunningJob",
    "SchedulerConfig",
    "Snapshot",
    "TaskRequest",
    "VcQuota",
    "WaitCode",
    "WaitingReason",
    "WhileBorrowing",
    "WithinVc",
    "schedule",
]
