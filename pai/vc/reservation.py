"""Reservations: a gang that waited long enough holds the nodes it needs against smaller jobs of lower or equal
priority, so that a steady stream of small jobs cannot starve it.

A node where non-preemptible work runs is never held: it frees only when that work ends, which may be never, and
holding it would keep its idle capacity from every smaller job meanwhile (the gang looks elsewhere, or waits
without holding anything)."""

from __future__ import annotations

from pai.vc.capacity import NodePool
from pai.vc.gang import Gang


def reserve(pool: NodePool, gang: Gang, job: str, priority: int) -> list[int]:
    """Hold the emptiest nodes that could host the gang's GPU tasks once their work ends; returns the nodes."""
    gpu_needs = [n for n in gang.needs if n.gpu > 0]
    if not gpu_needs:
        return []
    big = gpu_needs[0]
    held: list[int] = []
    room = 0
    for i in pool.emptiest(big.gpu_type):
        if room >= len(gpu_needs):
            break
        if i in pool.held or pool.pinned[i] or not pool.matches(i, big.gpu_type, big.selector):
            continue
        if pool.total_gpu[i] < big.gpu or pool.total_cpu[i] < big.cpu or pool.total_mem[i] < big.mem:
            continue
        held.append(i)
        room += 1 if gang.exclusive else pool.total_gpu[i] // big.gpu
    if room < len(gpu_needs):
        return []
    for i in held:
        pool.held[i] = (job, priority)
    return held


def unreserve(pool: NodePool, job: str) -> bool:
    """Drop the job's holds; True when there were any."""
    mine = [i for i, (owner, _) in pool.held.items() if owner == job]
    for i in mine:
        del pool.held[i]
    return bool(mine)
