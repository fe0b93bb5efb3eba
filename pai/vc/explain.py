"""Why a gang does not fit on the nodes, in words and figures a person can act on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pai.vc.capacity import NodePool
from pai.vc.gang import Gang, Need
from pai.vc.reasons import WaitCode
from pai.vc.snapshot import WaitingReason


def _kinds(gang: Gang) -> list[tuple[Need, int]]:
    """One representative need per kind with its count, biggest first."""
    seen: dict[object, int] = {}
    reps: list[Need] = []
    for n in gang.needs:
        if n.kind not in seen:
            seen[n.kind] = 0
            reps.append(n)
        seen[n.kind] += 1
    return [(n, seen[n.kind]) for n in reps]


def _type_text(need: Need) -> str:
    text = f" of type {need.gpu_type}" if need.gpu_type else ""
    if need.selector:
        text += " with labels " + ",".join(f"{k}={v}" for k, v in need.selector)
    return text


def _labelled(need: Need) -> str:
    return " labelled " + ",".join(f"{k}={v}" for k, v in need.selector) if need.selector else ""


def explain_no_fit(pool: NodePool, gang: Gang, job: str, priority: int) -> WaitingReason:
    """Why the gang cannot be placed on the pool now."""
    return _explain(pool, gang, job, priority, never=False)


def explain_never_fits(empty: NodePool, gang: Gang) -> WaitingReason:
    """Why the gang cannot be placed even on an empty cluster (``empty`` is a pool built with empty=True)."""
    return _explain(empty, gang, "", 0, never=True)


def _explain(pool: NodePool, gang: Gang, job: str, priority: int, *, never: bool) -> WaitingReason:
    code = WaitCode.NEVER_FITS if never else WaitCode.NO_NODE_FITS
    free = "" if never else " free"
    for need, n in _kinds(gang):
        ok = [i for i in pool.candidates(need.gpu, need.gpu_type)
              if pool.fits(i, need, job, priority, exclusive=gang.exclusive)]
        if len(ok) >= n:
            continue
        if not never and _held_count(pool, need, job, priority, gang.exclusive) >= n:
            owners = sorted({pool.held[i][0] for i in pool.held})
            return WaitCode.HELD_FOR_RESERVATION.reason(
                f"nodes that fit are held for {', '.join(owners)}, which waited longer", heldFor=owners)
        if ok:
            what = "whole idle nodes" if gang.exclusive and not never else "nodes"
            count = len(ok)
            where = f"the cluster has {count}" if never else f"{count} have them now"
            msg = f"needs {n} {what}{_labelled(need)} with {need.describe()}{free}; {where}"
            return code.reason(msg, role=need.role, needNodes=n, haveNodes=count, needGpu=need.gpu)
        return _single(pool, need, code, never=never, exclusive=gang.exclusive)
    where = "even on an empty cluster" if never else "on the free nodes"
    return code.reason(f"its {len(gang.needs)} tasks do not fit together {where}", tasks=len(gang.needs))


def _held_count(pool: NodePool, need: Need, job: str, priority: int, exclusive: bool) -> int:
    if not pool.held:
        return 0
    return sum(1 for i in pool.candidates(need.gpu, need.gpu_type)
               if pool.fits(i, need, job, priority, exclusive=exclusive, ignore_holds=True))


def _single(pool: NodePool, need: Need, code: WaitCode, *, never: bool, exclusive: bool) -> WaitingReason:
    """Why no node at all can take one task of this kind: the first resource that is short."""
    free = "" if never else " free"
    best = next(_matching(pool, need, -(2**62)), None)
    if best is None:
        figures: dict[str, Any] = {"role": need.role, "gpuType": need.gpu_type}
        if need.selector:
            figures["nodeSelector"] = dict(need.selector)
        if never:
            return code.reason(f"the cluster has no node{_type_text(need)}", **figures)
        whole = [i for i in pool.whole_nodes(need.gpu_type) if pool.matches(i, None, need.selector)]
        if whole:
            return code.reason(f"every schedulable node{_type_text(need)} runs a job that holds it whole "
                               f"(nothing may run beside it): {', '.join(pool.names[i] for i in whole[:5])}",
                               **figures, wholeNodes=len(whole))
        return code.reason(f"no schedulable node{_type_text(need)}", **figures)
    if pool.free_gpu[best] < need.gpu:
        return code.reason(
            f"no node has {_gpus(need.gpu, free)}{_type_text(need)} (largest{free}: {pool.free_gpu[best]} on "
            f"{pool.names[best]})",
            role=need.role, needGpu=need.gpu, largestFreeGpu=pool.free_gpu[best], node=pool.names[best])
    enough = list(_matching(pool, need, need.gpu))
    on_gpu = f" on one node with {_gpus(need.gpu, free)}" if need.gpu > 0 else " on one node"
    for label, unit, want, have in (("CPU", "CPU", need.cpu, pool.free_cpu), ("memory", "MB", need.mem, pool.free_mem),
                                    ("ports", "ports", need.ports, pool.free_ports)):
        top = _argmax(enough, have)
        if have[top] < want:
            return code.reason(
                f"needs {want} {unit}{on_gpu} (most{free} {label}: {have[top]} on {pool.names[top]})",
                role=need.role, resource=label, need=want, largestFree=have[top], node=pool.names[top])
    if exclusive:
        return code.reason(f"needs a whole idle node{_type_text(need)} for each GPU task; none is idle",
                           role=need.role)
    return code.reason(f"no node{_labelled(need)} has {need.describe()}{free} at once", role=need.role)


def _matching(pool: NodePool, need: Need, min_gpu: int) -> Iterator[int]:
    """Open nodes of the need's type and labels with at least ``min_gpu`` free GPUs, most free first."""
    for i in pool.emptiest(need.gpu_type):
        if pool.free_gpu[i] < min_gpu:
            return
        if not need.selector or pool.matches(i, None, need.selector):
            yield i


def _argmax(nodes: list[int], amounts: list[int]) -> int:
    best = nodes[0]
    for i in nodes:
        if amounts[i] > amounts[best]:
            best = i
    return best


def _gpus(n: int, free: str) -> str:
    return f"{n}{free} GPU" + ("" if n == 1 else "s")
