"""What a replay starts from (pai.vc.replay): the nodes, the workload, the configuration, the jobs already running,
the clock's settings; and the same setup rigid, to compare elastic jobs against."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pai.domain.errors import InvalidParametersError
from pai.domain.resources import Resources
from pai.domain.timing import FULL_PASS_SECONDS, GRACE_SECONDS
from pai.vc.config import ClusterConfig
from pai.vc.snapshot import NodeView, RunningJob
from pai.vc.trace import TraceJob


@dataclass(frozen=True, slots=True)
class LiveJob:
    """A job already running when the replay starts (read from a master): it finishes ``remaining`` seconds in;
    preempted, it waits again and then runs ``duration``. ``stopping``: being stopped, it exits after the grace
    period and is not requeued."""

    job: RunningJob
    submitted_at: float
    remaining: float
    duration: float
    stopping: bool = False


@dataclass(frozen=True, slots=True)
class Setup:
    nodes: tuple[NodeView, ...]
    jobs: tuple[TraceJob, ...]  # jobs submitted before ``start`` wait when it begins
    config: ClusterConfig = field(default_factory=ClusterConfig)
    running: tuple[LiveJob, ...] = ()
    start: float = 0.0
    until: float | None = None
    grace_seconds: float = GRACE_SECONDS
    full_pass_seconds: float = FULL_PASS_SECONDS
    snapshot_passes: bool = False  # every pass is ``schedule(snapshot)`` (always so when a job is elastic)

    def __post_init__(self) -> None:
        if not self.full_pass_seconds > 0 or not self.grace_seconds >= 0:
            raise InvalidParametersError("the full-pass period must be positive and the grace period at least 0")


def rigid(setup: Setup) -> Setup:
    """The same setup with every job rigid at the size it asks, on the same scheduling path (to compare)."""
    return replace(setup, jobs=tuple(replace(j, elastic=()) for j in setup.jobs),
                   running=tuple(replace(r, job=replace(r.job, elastic=())) for r in setup.running),
                   snapshot_passes=setup.snapshot_passes or is_elastic(setup))


def is_elastic(setup: Setup) -> bool:
    return any(j.elastic for j in setup.jobs) or any(r.job.elastic for r in setup.running)


def with_usage(nodes: tuple[NodeView, ...], running: tuple[LiveJob, ...]) -> tuple[NodeView, ...]:
    """The nodes with what the live running jobs hold on them (as the launcher's snapshot has it)."""
    used: dict[str, Resources] = {}
    for live in running:
        for t, node in live.job.tasks:
            used[node] = used.get(node, Resources()) + t.resources
    unknown = sorted(set(used) - {n.name for n in nodes})
    if unknown:
        raise InvalidParametersError(f"running tasks on unknown nodes: {', '.join(unknown)}", field="running")
    return tuple(replace(n, used=n.used + used[n.name]) if n.name in used else n for n in nodes)
