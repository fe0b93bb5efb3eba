"""All-or-nothing best-fit placement of a gang on a NodePool."""

from __future__ import annotations

from dataclasses import dataclass

from pai.vc.capacity import Cap, NodePool
from pai.vc.gang import Gang, Need
from pai.vc.snapshot import Admission, Placement


@dataclass(frozen=True, slots=True)
class Taken:
    """One task placed on node ``node`` of the pool."""

    need: Need
    node: int


def place(pool: NodePool, gang: Gang, job: str, priority: int, *, ignore_holds: bool = False,
          cap: Cap | None = None) -> list[Taken] | None:
    """Place every task of the gang (biggest first, each on the fullest node that fits) or none of them. ``cap``:
    only where it allows, and it keeps what was placed (pai.vc.node_lending)."""
    if not _may_fit(pool, gang):
        return None
    taken: list[Taken] = []
    for need in gang.needs:
        i = pool.best_fit(need, job, priority, exclusive=gang.exclusive, ignore_holds=ignore_holds, cap=cap)
        if i is None:
            release(pool, taken)
            if cap is not None:
                for t in taken:
                    cap.give(t.node, t.need)
            return None
        hold(pool, need, i, gang.exclusive)
        if cap is not None:
            cap.take(i, need)
        taken.append(Taken(need, i))
    return taken


def hold(pool: NodePool, need: Need, i: int, exclusive: bool) -> None:
    pool.take(i, need.gpu, need.cpu, need.mem, need.ports)
    if exclusive:
        pool.close(i)


def release(pool: NodePool, taken: list[Taken]) -> None:
    for t in reversed(taken):
        pool.give(t.node, t.need.gpu, t.need.cpu, t.need.mem, t.need.ports)
        pool.reopen(t.node)


def _may_fit(pool: NodePool, gang: Gang) -> bool:
    """A cheap necessary condition for gangs of big tasks (no two fit on one node): enough open nodes with
    enough free GPUs. Needs are sorted biggest first, so the k-th such task needs k nodes with its GPU count."""
    needs = gang.needs
    if len(needs) < 2 or needs[1].gpu <= 0:
        return True
    gpu_type = needs[0].gpu_type
    count = 0
    for k, need in enumerate(needs):
        if need.gpu <= 0 or need.gpu_type != gpu_type or (2 * need.gpu <= pool.max_gpu and not gang.exclusive):
            break
        count = k + 1
        nxt = needs[k + 1] if k + 1 < len(needs) else None
        if (nxt is None or nxt.gpu != need.gpu) and pool.count_open(need.gpu, gpu_type) < count:
            return False
    return True


def to_admission(pool: NodePool, job: str, taken: list[Taken]) -> Admission:
    placements = sorted((Placement(t.need.role, t.need.index, pool.names[t.node]) for t in taken),
                        key=lambda p: (p.role, p.index))
    return Admission(job, tuple(placements))
