"""The sentences of quota and preemption reasons (placement reasons are in explain.py)."""

from __future__ import annotations

from typing import Any

from pai.domain.resources import Resources
from pai.vc.ledger import VcLedger
from pai.vc.preemption import FAIR_SHARE, IN_FLIGHT, RECLAIM, WHILE_BORROWING, WITHIN_VC
from pai.vc.reasons import WaitCode
from pai.vc.snapshot import Admission, PendingJob, RunningJob, WaitingReason


def _amounts(used: Resources, need: Resources, cap: Resources) -> list[tuple[str, int, int, int]]:
    return [("GPU", used.gpu, need.gpu, cap.gpu), ("CPU", used.cpu, need.cpu, cap.cpu),
            ("MB memory", used.memory_mb, need.memory_mb, cap.memory_mb)]


def at_max(vc: VcLedger, request: Resources) -> WaitingReason:
    for label, used, need, cap in _amounts(vc.used, request, vc.max):
        if used + need > cap:
            return WaitCode.VC_AT_MAX.reason(
                f"VC `{vc.name}` at max: {used}/{cap} {label} in use, the job needs {need}",
                vc=vc.name, resource=label, used=used, max=cap, need=need)
    return WaitCode.VC_AT_MAX.reason(f"VC `{vc.name}` at max", vc=vc.name)


def user_limited(vc: VcLedger, user: str, gpu: int) -> WaitingReason:
    limit = vc.quota.gpu_limit_for(user)
    have = vc.user_gpu.get(user, 0)
    return WaitCode.USER_LIMIT.reason(
        f"user {user} would use {have + gpu} GPUs in VC `{vc.name}`; the limit is {limit}",
        user=user, used=have, limit=limit, need=gpu)


def lending_limited(vc: VcLedger, request: Resources, lenders: list[VcLedger]) -> WaitingReason:
    keepers = [v.name for v in lenders if v is not vc and v.held_back() != Resources()]
    names = ", ".join(f"`{n}`" for n in keepers)
    return WaitCode.LENDING_LIMIT.reason(
        f"VC `{vc.name}` would borrow {request.describe()} beyond its guarantee, but the idle capacity is "
        f"guarantee that VC {names} keeps for itself (lendingLimit)", vc=vc.name, keptBy=keepers)


def waiting_for_victims(count: int, planned: Admission | None) -> WaitingReason:
    jobs = "job exits" if count == 1 else "jobs exit"
    figures: dict[str, Any] = {"victims": count}
    if planned is not None:
        figures["placement"] = {f"{p.role}-{p.index}": p.node for p in planned.placements}
    return WaitCode.WAITING_FOR_PREEMPTION.reason(f"will start when {count} preempted {jobs}", **figures)


def held_by_non_preemptible(reason: WaitingReason, jobs: list[RunningJob]) -> WaitingReason:
    """``reason`` (why the job does not fit) said as what it is: non-preemptible work holds the capacity."""
    shown = [f"{j.key} on {', '.join(sorted({n for _, n in j.tasks}))}" for j in jobs[:3]]
    more = f" and {len(jobs) - 3} more" if len(jobs) > 3 else ""
    return WaitCode.HELD_BY_NON_PREEMPTIBLE.reason(
        f"non-preemptible work holds the capacity it needs ({'; '.join(shown)}{more}); {reason.message}",
        **{**reason.figures, "nonPreemptible": [j.key for j in jobs], "underlyingCode": reason.code})


def preemption_message(victim: RunningJob, job: PendingJob, rule: str) -> str:
    if rule == RECLAIM:
        return (f"VC `{job.vc}` reclaims its guarantee from VC `{victim.vc}`, which is above its own, "
                f"for {job.key} (priority {job.priority})")
    if rule == WHILE_BORROWING:
        return (f"{job.key} (priority {job.priority}) preempts {victim.key} (priority {victim.priority}), which runs "
                f"on capacity VC `{victim.vc}` borrowed")
    if rule == WITHIN_VC:
        return (f"{job.key} (priority {job.priority}) preempts {victim.key} (priority {victim.priority}) "
                f"in VC `{job.vc}`")
    if rule == FAIR_SHARE:
        return (f"fair sharing: VC `{victim.vc}` borrows a larger weighted share of the cluster than VC `{job.vc}` "
                f"would with {job.key} (priority {job.priority}), which preempts {victim.key} "
                f"(priority {victim.priority})")
    assert rule != IN_FLIGHT, "jobs already being stopped are not preempted again"
    return f"{job.key} preempts {victim.key} ({rule})"
