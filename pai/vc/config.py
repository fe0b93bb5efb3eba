"""The VC configuration file (``job_schemas/vc-config.json``) as scheduler objects.

``parse_config`` takes a document that passed the schema; ``ClusterConfig.quotas(total)`` resolves percents
against the cluster total (call it again when the cluster changes) and checks that guarantees fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pai.domain.errors import InvalidParametersError
from pai.domain.jobspec import PRIORITY_CLASSES
from pai.domain.limits import DEFAULT_JOB_LIMITS, JobLimits
from pai.domain.preemptible import ADMINS_ONLY, NonPreemptibleGrant
from pai.domain.resources import ZERO, Resources
from pai.vc.policy import (
    DEFAULT_CONFIG,
    FairShareStrategy,
    FairSharing,
    NodeLendingLimit,
    PreemptionPolicy,
    Reclaim,
    SchedulerConfig,
    WhileBorrowing,
    WithinVc,
)
from pai.vc.quota import DEFAULT_VC, RESOURCE_KEYS, resolve_amount, resolve_resources, validate_guarantees
from pai.vc.snapshot import VcQuota

Amounts = Mapping[str, int | float | str]


@dataclass(frozen=True, slots=True)
class VcConfig:
    """One VC as written: amounts may still be percents."""

    name: str
    guaranteed: Amounts | None = None  # None: 0, or the rest of the cluster for `default`
    max: Amounts | None = None
    lending_limit: Amounts | None = None
    preemption: PreemptionPolicy = field(default_factory=PreemptionPolicy)
    strict_fifo: bool = False
    user_gpu_limit: int | None = None
    user_gpu_limits: dict[str, int] = field(default_factory=dict)
    weight: float = 1.0  # fairSharing.weight

    def quota(self, total: Resources, guaranteed: Resources | None = None) -> VcQuota:
        where = f"virtualClusters.{self.name}"
        if guaranteed is None:
            guaranteed = resolve_resources(self.guaranteed or {}, total, field=f"{where}.guaranteed")
        return VcQuota(
            name=self.name,
            guaranteed=guaranteed,
            max=_maybe(self.max, total, f"{where}.max"),
            lending_limit=_maybe(self.lending_limit, total, f"{where}.lendingLimit"),
            preemption=self.preemption,
            strict_fifo=self.strict_fifo,
            user_gpu_limit=self.user_gpu_limit,
            user_gpu_limits=dict(self.user_gpu_limits),
            weight=self.weight,
        )


def _maybe(amounts: Amounts | None, total: Resources, where: str) -> Resources | None:
    if amounts is None:
        return None
    # a max or lending limit that leaves a resource out does not limit it
    unlimited = {"gpu": 10**15, "cpu": 10**15, "memoryMB": 10**18}
    return resolve_resources({**unlimited, **amounts}, total, field=where)


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    vcs: tuple[VcConfig, ...] = (VcConfig(DEFAULT_VC),)
    scheduler: SchedulerConfig = DEFAULT_CONFIG
    priority_classes: dict[str, int] = field(default_factory=lambda: dict(PRIORITY_CLASSES))
    limits: JobLimits = DEFAULT_JOB_LIMITS
    non_preemptible: NonPreemptibleGrant = ADMINS_ONLY  # who may submit non-preemptible jobs

    def quotas(self, total: Resources) -> tuple[VcQuota, ...]:
        """Absolute quotas for a cluster of ``total``; ``default`` (added when missing) without a guarantee
        holds the rest. Raises InvalidParametersError when guarantees sum past the cluster."""
        explicit = [v.quota(total) if v.guaranteed is not None or v.name != DEFAULT_VC else None for v in self.vcs]
        taken = sum((q.guaranteed for q in explicit if q is not None), ZERO)
        rest = (total - taken).clamp0()
        out = [q if q is not None else v.quota(total, rest) for v, q in zip(self.vcs, explicit, strict=True)]
        if all(v.name != DEFAULT_VC for v in self.vcs):
            out.append(VcQuota(DEFAULT_VC, guaranteed=rest))
        validate_guarantees(out, total)
        return tuple(out)

    def priority(self, name: str) -> int:
        try:
            return self.priority_classes[name]
        except KeyError:
            known = ", ".join(sorted(self.priority_classes))
            raise InvalidParametersError(f"unknown priority class {name!r} (known: {known})",
                                         field="priorityClass") from None


def parse_config(doc: Mapping[str, Any]) -> ClusterConfig:
    """A schema-valid configuration document as a ClusterConfig (names checked, nothing resolved yet)."""
    vcs = tuple(vc_config(d) for d in doc.get("virtualClusters", [{"name": DEFAULT_VC}]))
    seen: set[str] = set()
    for v in vcs:
        if v.name in seen:
            raise InvalidParametersError(f"virtual cluster {v.name!r} is listed twice", field="virtualClusters")
        seen.add(v.name)
    classes = dict(PRIORITY_CLASSES)
    for name, value in doc.get("priorityClasses", {}).items():
        if name in PRIORITY_CLASSES and PRIORITY_CLASSES[name] != value:
            raise InvalidParametersError(
                f"priority class {name!r} is OpenPAI's ({PRIORITY_CLASSES[name]}) and cannot be redefined",
                field=f"priorityClasses.{name}")
        classes[name] = int(value)
    grant = NonPreemptibleGrant.of(doc.get("nonPreemptible"))
    unknown = sorted(grant.priority_classes - set(classes))
    if unknown:
        raise InvalidParametersError(f"nonPreemptible.priorityClasses: {unknown[0]!r} is not a priority class "
                                     f"(known: {', '.join(sorted(classes))})", field="nonPreemptible.priorityClasses")
    return ClusterConfig(vcs, scheduler_config(doc.get("scheduler", {})), classes, job_limits(doc.get("limits", {})),
                         grant)


def job_limits(d: Mapping[str, Any]) -> JobLimits:
    base = DEFAULT_JOB_LIMITS
    return JobLimits(
        tasks_per_role=int(d.get("tasksPerRole", base.tasks_per_role)),
        tasks_per_job=int(d.get("tasksPerJob", base.tasks_per_job)),
        trials_per_experiment=int(d.get("trialsPerExperiment", base.trials_per_experiment)),
    )


def vc_config(d: Mapping[str, Any]) -> VcConfig:
    p = d.get("preemption", {})
    wb = p.get("whileBorrowing", {})
    policy = PreemptionPolicy(
        reclaim=Reclaim(p.get("reclaim", Reclaim.ANY.value)),
        within_vc=WithinVc(p.get("withinVc", WithinVc.LOWER_PRIORITY.value)),
        while_borrowing=WhileBorrowing(bool(wb.get("enabled", False)), int(wb.get("priorityThreshold", -1))),
    )
    limits = d.get("userLimits", {})
    return VcConfig(
        name=str(d["name"]),
        guaranteed=d.get("guaranteed"),
        max=d.get("max"),
        lending_limit=d.get("lendingLimit"),
        preemption=policy,
        strict_fifo=bool(d.get("strictFifo", False)),
        user_gpu_limit=limits.get("gpu"),
        user_gpu_limits={str(k): int(v) for k, v in limits.get("users", {}).items()},
        weight=float(d.get("fairSharing", {}).get("weight", 1.0)),
    )


def scheduler_config(d: Mapping[str, Any]) -> SchedulerConfig:
    base = DEFAULT_CONFIG
    return SchedulerConfig(
        max_preemption_fraction=float(d.get("maxPreemptionFraction", base.max_preemption_fraction)),
        min_run_seconds=float(d.get("minRunSeconds", base.min_run_seconds)),
        reservation_after_seconds=float(d.get("reservationAfterSeconds", base.reservation_after_seconds)),
        max_reservations=int(d.get("maxReservations", base.max_reservations)),
        whole_nodes_for_multi_node_gpu=bool(d.get("wholeNodesForMultiNodeGpu", base.whole_nodes_for_multi_node_gpu)),
        unblock_hints_per_vc=int(d.get("unblockHintsPerVc", base.unblock_hints_per_vc)),
        fair_sharing=fair_sharing(d.get("fairSharing", {})),
        node_lending_limit=node_lending_limit(d.get("nodeLendingLimit")),
        resize_interval_seconds=resize_interval(d.get("elastic", {})),
    )


def resize_interval(d: Mapping[str, Any]) -> float:
    """``scheduler.elastic.resizeIntervalSeconds``: a number of seconds, 0 to a year."""
    where = "scheduler.elastic.resizeIntervalSeconds"
    value = d.get("resizeIntervalSeconds", DEFAULT_CONFIG.resize_interval_seconds)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 31_536_000:
        raise InvalidParametersError(f"{where}: {value!r} is not a number of seconds from 0 to 31536000", field=where)
    return float(value)


def fair_sharing(d: Mapping[str, Any]) -> FairSharing:
    base = FairSharing()
    return FairSharing(enabled=bool(d.get("enabled", base.enabled)),
                       strategy=FairShareStrategy(d.get("strategy", base.strategy.value)))


def node_lending_limit(d: Mapping[str, Any] | None) -> NodeLendingLimit | None:
    """``scheduler.nodeLendingLimit``: amounts are checked here (a percent is resolved per node by the scheduler)."""
    if d is None:
        return None
    where = "scheduler.nodeLendingLimit"
    if not isinstance(d, Mapping):
        raise InvalidParametersError(f"{where}: expected {{gpu, cpu, memoryMB}}", field=where)
    unknown = sorted(set(d) - set(RESOURCE_KEYS))
    if unknown:
        raise InvalidParametersError(f"{where}: unknown resource {unknown[0]!r} (known: {', '.join(RESOURCE_KEYS)})",
                                     field=where)
    for key, value in d.items():
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise InvalidParametersError(f"{where}.{key}: {value!r} is neither a number nor a percent",
                                         field=f"{where}.{key}")
        resolve_amount(value, 100, field=f"{where}.{key}")  # refuses what no node could resolve
    return NodeLendingLimit(gpu=d.get("gpu"), cpu=d.get("cpu"), memory_mb=d.get("memoryMB"))
