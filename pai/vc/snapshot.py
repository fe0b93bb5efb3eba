"""What the scheduler sees (Snapshot) and what it decides (Decision)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pai.domain.resources import Resources


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    total: Resources
    used: Resources = Resources()
    gpu_type: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    schedulable: bool = True
    free_ports: int = 1_000_000

    @property
    def free(self) -> Resources:
        return self.total - self.used


@dataclass(frozen=True, slots=True)
class TaskRequest:
    role: str
    index: int
    resources: Resources
    gpu_type: str | None = None
    ports: int = 2  # how many ports the task needs on its node


@dataclass(frozen=True, slots=True)
class PendingJob:
    key: str
    vc: str
    user: str
    priority: int
    submitted_at: float
    tasks: tuple[TaskRequest, ...]

    @property
    def request(self) -> Resources:
        acc = Resources()
        for t in self.tasks:
            acc = acc + t.resources
        return acc


@dataclass(frozen=True, slots=True)
class RunningJob:
    key: str
    vc: str
    user: str
    priority: int
    started_at: float
    tasks: tuple[tuple[TaskRequest, str], ...]  # (request, node name)
    preempting: bool = False  # already told to stop; its resources are freed when it exits

    @property
    def request(self) -> Resources:
        acc = Resources()
        for t, _ in self.tasks:
            acc = acc + t.resources
        return acc


@dataclass(frozen=True, slots=True)
class VcQuota:
    name: str
    guaranteed: Resources = Resources()
    max: Resources | None = None  # None: the whole cluster


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    nodes: tuple[NodeView, ...]
    vcs: tuple[VcQuota, ...] = (VcQuota("default"),)
    running: tuple[RunningJob, ...] = ()
    pending: tuple[PendingJob, ...] = ()


@dataclass(frozen=True, slots=True)
class Placement:
    role: str
    index: int
    node: str


@dataclass(frozen=True, slots=True)
class Admission:
    job: str
    placements: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class Preemption:
    victim: str
    preemptor: str
    rule: str  # e.g. "reclaim", "within-vc"
    message: str = ""


@dataclass(frozen=True, slots=True)
class WaitingReason:
    code: str  # e.g. "NoNodeFits", "VcAtMax", "WaitingForPreemption", "Queued"
    message: str
    position: int = 0  # 1-based position in its VC's queue
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "position": self.position, "figures": self.figures}


@dataclass(frozen=True, slots=True)
class Decision:
    admissions: tuple[Admission, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    waiting: dict[str, WaitingReason] = field(default_factory=dict)
