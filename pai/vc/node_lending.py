"""The per-node lending limit (``scheduler.nodeLendingLimit``, docs/scheduling.md#per-node-lending-limit).

On any one node, borrowed work (pai.vc.borrowed: what runs beyond its VC's guarantee, ``oppo`` work always) may
hold at most the limit, so every node keeps room for work within guarantees and the capacity a lender keeps cannot
be scattered by borrowers. The rules:

* Off (no ``nodeLendingLimit``, the default): State has no NodeLending and nothing here runs.
* A borrowing job (Round's ``borrowing``: oppo, or it takes its VC past its guarantee) is placed only where the
  limit leaves room for each of its tasks: a task may go to a node only if, on every resource the task asks for,
  the node's borrowed work plus the task (plus the job's other tasks placed there) stays within the node's limit.
  Jobs within their VC's guarantee ignore the limit.
* When only the limit keeps a borrowing job out (it would fit without it), it waits with ``LendingLimit``, naming
  the nodes at the limit; it preempts nothing for it. When it would not fit even without the limit, the usual
  no-fit path follows (preemption, ``NoNodeFits``).
* A plan that preempts for a borrowing job (whileBorrowing, fair share, within its VC while over its guarantee) is
  refused (the job waits with ``LendingLimit``) when its placement would put a node past the limit, counting the
  borrowed work its victims free there. The planner does not look for another placement that would respect it.
* What a pass admits while borrowing counts on its nodes for the rest of the pass; jobs planned behind
  preemptions count once they start. Between passes (IncrementalScheduler) the VCs whose running jobs changed are
  computed again from the rule, so an incremental pass sees what a full pass sees.

Percent amounts are of each node: its usable GPUs, its CPUs, its memory (rounded down).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pai.domain.resources import ZERO
from pai.vc.borrowed import borrowed_in_order
from pai.vc.capacity import NodePool
from pai.vc.gang import Gang, Need
from pai.vc.ledger import VcLedger
from pai.vc.order import always_borrows
from pai.vc.placement import Taken, place, release
from pai.vc.policy import NodeLendingLimit
from pai.vc.quota import resolve_amount
from pai.vc.reasons import WaitCode
from pai.vc.snapshot import PendingJob, RunningJob, WaitingReason
from pai.vc.victims import VictimIndex, node_shares

if TYPE_CHECKING:
    from pai.vc.round import Round
    from pai.vc.search import Plan

UNLIMITED = 10**18
CAPPED = "nodeLendingLimit"  # marks a placement memo made under the limit (Round._no_fit)
EXAMINE_NODES = 256  # nodes looked at to name those at the limit
SHOWN = 3  # nodes named in a sentence
Shares = dict[int, list[int]]  # node index -> [gpu, cpu, memory] a job holds there


class NodeLending:
    """Per node: the limit, and what borrowed work holds (running, and admitted by the pass)."""

    def __init__(self, limit: NodeLendingLimit, pool: NodePool) -> None:
        self.limit = limit
        self.names = pool.names
        self.node_index = pool.index
        n = len(pool.names)
        self.cap_gpu = [_resolve(limit.gpu, pool.total_gpu[i]) for i in range(n)]
        self.cap_cpu = [_resolve(limit.cpu, pool.total_cpu[i]) for i in range(n)]
        self.cap_mem = [_resolve(limit.memory_mb, pool.total_mem[i]) for i in range(n)]
        self.gpu = [0] * n
        self.cpu = [0] * n
        self.mem = [0] * n
        self.jobs: dict[str, dict[str, Shares]] = {}  # VC -> its borrowed jobs (and those a pass admitted borrowing)
        self.dirty: set[str] = set()  # VCs whose running jobs changed since they were computed

    @classmethod
    def of(cls, limit: NodeLendingLimit, pool: NodePool, vcs: Mapping[str, VcLedger], index: VictimIndex
           ) -> NodeLending:
        lending = cls(limit, pool)
        names = set(vcs)
        names.update(r.vc for r in index.jobs.values())
        for name in sorted(names):
            lending._set(name, lending._compute(name, vcs.get(name), index))
        return lending

    # ---- the borrowed jobs of a VC -------------------------------------------------------------------------

    def _compute(self, name: str, ledger: VcLedger | None, index: VictimIndex) -> dict[str, Shares]:
        if ledger is not None and not index.oppo.get(name) and ledger.settled.fits_in(ledger.guaranteed):
            return {}  # within its guarantee, no oppo work: it borrows nothing (no sort needed)
        guaranteed = ledger.guaranteed if ledger is not None else ZERO  # a VC no longer configured: all borrowed
        borrowed = borrowed_in_order(reversed(index.by_vc(name)), guaranteed)
        return {j.key: self._shares(j) for j in borrowed}

    def _shares(self, job: RunningJob) -> Shares:
        return {i: share[:3] for i, share in node_shares(job, self.node_index).items()}

    def _set(self, name: str, jobs: dict[str, Shares]) -> bool:
        """Replace what the VC's borrowed work holds; True when some node holds less of it than before."""
        old = _total(self.jobs.pop(name, {}).values())
        new = _total(jobs.values())
        if jobs:
            self.jobs[name] = jobs
        for i, (g, c, m) in old.items():
            self._add(i, -g, -c, -m)
        for i, (g, c, m) in new.items():
            self._add(i, g, c, m)
        return any(any(n < o for n, o in zip(new.get(i, [0, 0, 0]), amounts, strict=True))
                   for i, amounts in old.items())

    def refresh(self, index: VictimIndex, vcs: Mapping[str, VcLedger]) -> bool:
        """Compute the VCs whose running jobs changed again (IncrementalScheduler, before a pass); True when some
        node's borrowed work shrank (jobs the limit kept waiting may now fit)."""
        shrank = False
        for name in sorted(self.dirty):
            shrank = self._set(name, self._compute(name, vcs.get(name), index)) or shrank
        self.dirty.clear()
        return shrank

    # ---- placement -----------------------------------------------------------------------------------------

    def _add(self, i: int, gpu: int, cpu: int, mem: int) -> None:
        self.gpu[i] += gpu
        self.cpu[i] += cpu
        self.mem[i] += mem

    def allows(self, i: int, need: Need) -> bool:
        """May a borrowing task of ``need`` go to node ``i``? Only the resources it asks for are checked."""
        return ((need.gpu <= 0 or self.gpu[i] + need.gpu <= self.cap_gpu[i])
                and (need.cpu <= 0 or self.cpu[i] + need.cpu <= self.cap_cpu[i])
                and (need.mem <= 0 or self.mem[i] + need.mem <= self.cap_mem[i]))

    def cap(self, vc: str, job: str) -> BorrowerCap:
        return BorrowerCap(self, vc, job)

    def admit(self, vc: str, job: str, i: int, need: Need, step: int) -> None:
        """A pass placed (step 1) or gave back (-1) a borrowing task: it counts as borrowed on its node."""
        g, c, m = step * need.gpu, step * need.cpu, step * need.mem
        self._add(i, g, c, m)
        acc = self.jobs.setdefault(vc, {}).setdefault(job, {}).setdefault(i, [0, 0, 0])
        acc[0] += g
        acc[1] += c
        acc[2] += m

    def over_in_plan(self, taken: list[Taken], victims: Iterable[RunningJob]) -> list[int]:
        """Nodes a plan's placement would put past the limit once its victims' borrowed work there is gone."""
        adds: Shares = {}
        for t in taken:
            acc = adds.setdefault(t.node, [0, 0, 0])
            acc[0] += t.need.gpu
            acc[1] += t.need.cpu
            acc[2] += t.need.mem
        freed: Shares = {}
        for v in victims:
            for i, (g, c, m) in self.jobs.get(v.vc, {}).get(v.key, {}).items():
                if i in adds:
                    acc = freed.setdefault(i, [0, 0, 0])
                    acc[0] += g
                    acc[1] += c
                    acc[2] += m
        over = []
        for i, (g, c, m) in adds.items():
            fg, fc, fm = freed.get(i, (0, 0, 0))
            if ((g > 0 and self.gpu[i] - fg + g > self.cap_gpu[i]) or (c > 0 and self.cpu[i] - fc + c > self.cap_cpu[i])
                    or (m > 0 and self.mem[i] - fm + m > self.cap_mem[i])):
                over.append(i)
        return sorted(over)

    # ---- wording -------------------------------------------------------------------------------------------

    def describe_limit(self) -> str:
        """``4 GPU, 50% of the CPU``: the limit as written."""
        parts = [_amount(v, label) for v, label in (
            (self.limit.gpu, "GPU"), (self.limit.cpu, "CPU"), (self.limit.memory_mb, "MB memory")) if v is not None]
        return ", ".join(parts) or "nothing"

    def describe_node(self, i: int, need: Need) -> str:
        """``n0 (4/4 GPU borrowed)``: what keeps the task off the node."""
        parts = [f"{used}/{cap} {label}" for used, cap, want, label in (
            (self.gpu[i], self.cap_gpu[i], need.gpu, "GPU"), (self.cpu[i], self.cap_cpu[i], need.cpu, "CPU"),
            (self.mem[i], self.cap_mem[i], need.mem, "MB")) if want > 0 and used + want > cap]
        return f"{self.names[i]} ({', '.join(parts)} borrowed)"

    def figures(self) -> dict[str, Any]:
        return {"nodeLendingLimit": {k: v for k, v in (("gpu", self.limit.gpu), ("cpu", self.limit.cpu),
                                                        ("memoryMB", self.limit.memory_mb)) if v is not None}}


@dataclass(slots=True)
class BorrowerCap:
    """The limit as one borrowing job's placement sees it (pai.vc.capacity.Cap): what it places counts."""

    lending: NodeLending
    vc: str
    job: str

    def allows(self, i: int, need: Need) -> bool:
        return self.lending.allows(i, need)

    def take(self, i: int, need: Need) -> None:
        self.lending.admit(self.vc, self.job, i, need, 1)

    def give(self, i: int, need: Need) -> None:
        self.lending.admit(self.vc, self.job, i, need, -1)


# ---- the pass's side (pai.vc.round, pai.vc.nongang) ----------------------------------------------------------

def place_borrowed(r: Round, job: PendingJob, gang: Gang, lending: NodeLending) -> list[Taken] | WaitingReason | None:
    """Place a borrowing job only where the limit leaves room. None: it would not fit even without the limit (the
    usual no-fit path follows); a ``LendingLimit`` reason: only the limit keeps it out."""
    plain: tuple[object, ...] = (gang.key, job.priority)
    capped: tuple[object, ...] = (gang.key, job.priority, CAPPED)
    if job.key not in r.reserved:  # failures stay failures for the pass (borrowed work only grows in it)
        if plain in r._no_fit:
            return None
        known = r._no_fit.get(capped)
        if known is not None:
            return known
    taken = place(r.pool, gang, job.key, job.priority, cap=lending.cap(job.vc, job.key))
    if taken is not None:
        return taken
    free = r._place(job, gang)
    if free is None:
        return None
    release(r.pool, free)
    reason = r._no_fit[capped] = at_node_limit(r.pool, lending, job, gang, r.vcs[job.vc])
    return reason


def at_node_limit(pool: NodePool, lending: NodeLending, job: PendingJob, gang: Gang, vc: VcLedger) -> WaitingReason:
    """The reason of a borrowing job the limit alone keeps out: the nodes with room for a task of it where borrowed
    work would pass the limit."""
    at: list[int] = []
    need = gang.needs[0]
    seen: set[object] = set()
    for n in gang.needs:
        if n.kind in seen:
            continue
        seen.add(n.kind)
        for examined, i in enumerate(pool.candidates(n.gpu, n.gpu_type)):
            if examined >= EXAMINE_NODES:
                break
            if not lending.allows(i, n) and pool.fits(i, n, job.key, job.priority, exclusive=gang.exclusive):
                at.append(i)
        if at:
            need = n
            break
    return _reason(lending, vc, gang, need, sorted(at), "the nodes with room for it are at that limit")


def refuse_plan(r: Round, job: PendingJob, gang: Gang, vc: VcLedger, plan: Plan) -> WaitingReason | None:
    """A ``LendingLimit`` reason when a borrowing job's preemption plan would put a node past the limit; None when
    the limit is off, the job does not borrow, or the plan respects it."""
    lending = r.state.lending
    if lending is None or not (always_borrows(job.priority) or not vc.within_guarantee(gang.request)):
        return None
    over = lending.over_in_plan(plan.taken, (v.job for v in plan.victims))
    if not over:
        return None
    need = next(t.need for t in plan.taken if t.node == over[0])
    return _reason(lending, vc, gang, need, over, "preempting for it would put borrowed work past that limit on")


def _reason(lending: NodeLending, vc: VcLedger, gang: Gang, need: Need, nodes: list[int], what: str
            ) -> WaitingReason:
    shown = "; ".join(lending.describe_node(i, need) for i in nodes[:SHOWN])
    more = f" and {len(nodes) - SHOWN} more" if len(nodes) > SHOWN else ""
    where = f": {shown}{more}" if nodes else ""
    return WaitCode.LENDING_LIMIT.reason(
        f"VC `{vc.name}` would borrow {gang.request.describe()} beyond its guarantee, but borrowed work may hold at "
        f"most {lending.describe_limit()} on any one node (nodeLendingLimit) and {what}{where}",
        vc=vc.name, scope="node", nodesAtLimit=[lending.names[i] for i in nodes], **lending.figures())


def _resolve(amount: int | str | None, total: int) -> int:
    return UNLIMITED if amount is None else resolve_amount(amount, total)


def _amount(value: int | str, label: str) -> str:
    percent = isinstance(value, str) and value.strip().endswith("%")
    return f"{str(value).strip()} of the {label}" if percent else f"{value} {label}"


def _total(jobs: Iterable[Shares]) -> Shares:
    out: Shares = {}
    for shares in jobs:
        for i, (g, c, m) in shares.items():
            acc = out.setdefault(i, [0, 0, 0])
            acc[0] += g
            acc[1] += c
            acc[2] += m
    return out
