"""What the scheduler sees (Snapshot) and what it decides (Decision)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pai.domain.resources import ZERO, Resources
from pai.vc.policy import DEFAULT_CONFIG, DEFAULT_POLICY, PreemptionPolicy, SchedulerConfig


@dataclass(frozen=True, slots=True)
class NodeView:
    """A worker node.

    ``used`` is everything in use on the node now: the tasks of ``Snapshot.running`` placed there (jobs being
    preempted included) plus anything else (system daemons, foreign containers). ``free_ports`` is the number of
    ports free on the node now. ``failed_gpus`` GPUs are subtracted from ``total.gpu`` (pass either a reduced
    total or this count, not both).
    """

    name: str
    total: Resources
    used: Resources = ZERO
    gpu_type: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    schedulable: bool = True
    free_ports: int = 1_000_000
    failed_gpus: int = 0

    @property
    def free(self) -> Resources:
        return self.total - self.used

    @property
    def usable(self) -> Resources:
        """The total minus failed GPUs: what the scheduler may ever place on this node."""
        return Resources(max(self.total.gpu - self.failed_gpus, 0), self.total.cpu, self.total.memory_mb)


@dataclass(frozen=True, slots=True)
class TaskRequest:
    role: str
    index: int
    resources: Resources
    gpu_type: str | None = None
    ports: int = 2  # how many ports the task needs on its node
    node_selector: tuple[tuple[str, str], ...] = ()  # (label, value) pairs the node must carry


@dataclass(frozen=True, slots=True)
class ElasticRole:
    """A role that may run on ``min_instances`` to ``max_instances`` tasks (``extras.elastic``, pai.vc.elastic)."""

    role: str
    min_instances: int
    max_instances: int


@dataclass(frozen=True, slots=True)
class PendingJob:
    key: str
    vc: str
    user: str
    priority: int
    submitted_at: float
    tasks: tuple[TaskRequest, ...]
    preemptible: bool = True  # False: once it runs, no rule may preempt it
    whole_nodes: bool = False  # every task takes a whole node, nothing else beside it (extras.wholeNodes)
    # False (OpenPAI ``gangAllocation: false``): its tasks are placed one by one as each fits (pai.vc.nongang); a
    # job partly placed is then also a RunningJob of the same key, for its placed tasks
    gang: bool = True
    expected_seconds: float | None = None  # how long it is expected to run once started (RunningJob's)
    expected_typical: bool = False  # (RunningJob's)
    # roles that may stretch: ``tasks`` is the size asked first; admitted at the minimum when that does not fit
    elastic: tuple[ElasticRole, ...] = ()

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
    preempted_by: str = ""  # key of the pending job it was preempted for, when known
    # False: never a victim, nor capacity a preemption could free (a job that needs it waits; others may use
    # what is idle beside it, and no reservation holds its nodes)
    preemptible: bool = True
    whole_nodes: bool = False  # asked for whole nodes (the cluster rule may give them too: gang.takes_whole_nodes)
    gang: bool = True  # False: placed task by task, so wholeNodesForMultiNodeGpu does not apply to it
    # how long it is expected to run (declared, or typical of its kind), for when it should end; None: unknown
    expected_seconds: float | None = None
    expected_typical: bool = False  # expected_seconds is the typical run time of its user's jobs, not declared
    elastic: tuple[ElasticRole, ...] = ()  # roles that may grow and shrink (pai.vc.elastic)
    last_resized_at: float | None = None  # when it last grew or shrank (None: never); growth waits the interval

    @property
    def request(self) -> Resources:
        acc = Resources()
        for t, _ in self.tasks:
            acc = acc + t.resources
        return acc


@dataclass(frozen=True, slots=True)
class VcQuota:
    """A virtual cluster's share, in absolute amounts (pai.vc.config resolves percents).

    The VC named ``default`` holds the rest of the cluster when its ``guaranteed`` is left at zero.
    ``lending_limit``: how much of its idle guarantee others may borrow (None: all of it).
    ``user_gpu_limit``: at most this many GPUs per user in this VC; ``user_gpu_limits`` overrides per user.
    """

    name: str
    guaranteed: Resources = ZERO
    max: Resources | None = None  # None: the whole cluster
    lending_limit: Resources | None = None
    preemption: PreemptionPolicy = DEFAULT_POLICY
    strict_fifo: bool = False
    user_gpu_limit: int | None = None
    user_gpu_limits: dict[str, int] = field(default_factory=dict)
    weight: float = 1.0  # its weight under fair sharing (pai.vc.fairshare): 2 borrows twice what 1 does; 0: last

    def gpu_limit_for(self, user: str) -> int | None:
        return self.user_gpu_limits.get(user, self.user_gpu_limit)


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    nodes: tuple[NodeView, ...]
    vcs: tuple[VcQuota, ...] = (VcQuota("default"),)
    running: tuple[RunningJob, ...] = ()
    pending: tuple[PendingJob, ...] = ()
    config: SchedulerConfig = DEFAULT_CONFIG


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


class ResizeCause(StrEnum):
    """Why an elastic job changes size; ``grows``: the cause adds tasks (the others take tasks away)."""

    IDLE_CAPACITY = "idle-capacity"  # capacity nobody waiting can use
    RECLAIM = "reclaim"  # a VC takes back its guarantee
    PRIORITY = "priority"  # a job of higher priority in the same VC (withinVc, or whileBorrowing)
    FAIR_SHARE = "fair-share"  # a borrower with a lower fair share

    @property
    def grows(self) -> bool:
        return self is ResizeCause.IDLE_CAPACITY


@dataclass(frozen=True, slots=True)
class Resize:
    """A running elastic job's role changes size (pai.vc.elastic). Growth: ``placements`` are the tasks to start
    (lowest free indices first). Shrink: ``removed`` are the indices to stop (highest first); ``preemptor`` is the
    job the capacity goes to."""

    job: str
    role: str
    size_from: int
    size_to: int
    cause: ResizeCause
    message: str  # e.g. "grew to 6: 2 GPUs idle in VC dev", "shrank to 4: VC prod reclaims 2 GPUs"
    placements: tuple[Placement, ...] = ()
    removed: tuple[int, ...] = ()
    preemptor: str = ""


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
    # Jobs waiting for their victims to exit, with the placement they will get (not yet to be started).
    planned: dict[str, Admission] = field(default_factory=dict)
    resizes: tuple[Resize, ...] = ()  # elastic jobs that grow or shrink (pai.vc.elastic)
