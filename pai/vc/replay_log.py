"""What a replay leaves: every job's outcome and every attempt's GPUs over time (pai.vc.replay_report sums them)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What became of one job. ``started_at``: its first start; ``reason``: the code it last waited with, when it
    never completed; ``live``: it ran when the replay began (no completion time or queueing delay is counted);
    ``resizes``: how often an elastic job grew or shrank."""

    key: str
    vc: str
    gpus: int
    submitted_at: float
    duration: float
    started_at: float | None
    completed_at: float | None
    preemptions: int
    reason: str = ""
    live: bool = False
    resizes: int = 0


@dataclass(frozen=True, slots=True)
class Attempt:
    """GPUs held from ``start`` to ``end`` (a preempted attempt until it exited, its grace period included)."""

    gpus: int
    start: float
    end: float
    preempted: bool = False


@dataclass(frozen=True, slots=True)
class ReplayLog:
    jobs: tuple[JobOutcome, ...]
    attempts: tuple[Attempt, ...]  # a live job's from the start of the replay; one still running ends at ``end``
    vcs: tuple[str, ...]  # the configuration's VCs, in its order
    start: float
    end: float
    capacity_gpus: int
    preemptions: int
    passes: int
    full_passes: int
    resizes: dict[str, int] = field(default_factory=dict)  # cause (pai.vc.snapshot.ResizeCause) -> resizes

    @property
    def gpu_seconds(self) -> float:
        return sum(a.gpus * (a.end - a.start) for a in self.attempts)

    @property
    def lost_gpu_seconds(self) -> float:
        return sum(a.gpus * (a.end - a.start) for a in self.attempts if a.preempted)
