"""Small builders for scheduler tests: node(), job(), running(), vc(), snap() and views of a Decision."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pai.domain.resources import Resources
from pai.vc import Decision, NodeView, PendingJob, RunningJob, Snapshot, TaskRequest, VcQuota
from pai.vc.policy import PreemptionPolicy, Reclaim, SchedulerConfig, WhileBorrowing, WithinVc
from pai.vc.snapshot import ElasticRole

Amount = tuple[int, int, int] | int | None


def res(amount: Amount) -> Resources | None:
    """``8`` is 8 GPU with room to spare in CPU and memory; ``(gpu, cpu, mem)`` is exact."""
    if amount is None:
        return None
    if isinstance(amount, int):
        return Resources(amount, 10**6, 10**9)
    return Resources(*amount)


def node(name: str, gpu: int = 8, cpu: int = 32, mem: int = 256_000, *, used: tuple[int, int, int] = (0, 0, 0),
         gpu_type: str | None = None, labels: dict[str, str] | None = None, schedulable: bool = True,
         free_ports: int = 1_000_000, failed_gpus: int = 0) -> NodeView:
    return NodeView(name=name, total=Resources(gpu, cpu, mem), used=Resources(*used), gpu_type=gpu_type,
                    labels=labels or {}, schedulable=schedulable, free_ports=free_ports, failed_gpus=failed_gpus)


def nodes(n: int, gpu: int = 8, cpu: int = 32, mem: int = 256_000, prefix: str = "node-", **kw: Any) -> list[NodeView]:
    return [node(f"{prefix}{i}", gpu, cpu, mem, **kw) for i in range(n)]


def tasks(gpu: int = 1, instances: int = 1, cpu: int = 1, mem: int = 1024, role: str = "main",
          gpu_type: str | None = None, ports: int = 2, selector: dict[str, str] | None = None,
          ) -> tuple[TaskRequest, ...]:
    sel = tuple(sorted((selector or {}).items()))
    return tuple(TaskRequest(role, i, Resources(gpu, cpu, mem), gpu_type, ports, sel) for i in range(instances))


def job(key: str, gpu: int = 1, *, instances: int = 1, cpu: int = 1, mem: int = 1024, vc: str = "default",
        user: str = "alice", priority: int = 10, at: float = 0.0, gpu_type: str | None = None, ports: int = 2,
        selector: dict[str, str] | None = None, roles: tuple[TaskRequest, ...] | None = None,
        preemptible: bool = True, elastic: tuple[int, int] | None = None) -> PendingJob:
    """``elastic=(min, max)``: its role ``main`` stretches from min to max instances."""
    ts = roles if roles is not None else tasks(gpu, instances, cpu, mem, gpu_type=gpu_type, ports=ports,
                                                selector=selector)
    return PendingJob(key=key, vc=vc, user=user, priority=priority, submitted_at=at, tasks=ts, preemptible=preemptible,
                      elastic=stretch(elastic))


def stretch(elastic: tuple[int, int] | None) -> tuple[ElasticRole, ...]:
    return () if elastic is None else (ElasticRole("main", *elastic),)


def running(key: str, on: str | list[str], gpu: int = 1, *, cpu: int = 1, mem: int = 1024, vc: str = "default",
            user: str = "bob", priority: int = 10, started: float = 0.0, preempting: bool = False,
            preempted_by: str = "", preemptible: bool = True, elastic: tuple[int, int] | None = None,
            resized: float | None = None) -> RunningJob:
    """``elastic=(min, max)``: its role ``main`` stretches; ``resized``: when it last grew or shrank."""
    where = [on] if isinstance(on, str) else on
    ts = tuple((TaskRequest("main", i, Resources(gpu, cpu, mem)), n) for i, n in enumerate(where))
    return RunningJob(key=key, vc=vc, user=user, priority=priority, started_at=started, tasks=ts,
                      preempting=preempting, preempted_by=preempted_by, preemptible=preemptible,
                      elastic=stretch(elastic), last_resized_at=resized)


def pinned(key: str, on: str | list[str], gpu: int = 1, **kw: Any) -> RunningJob:
    """A running job that is not preemptible (``extras.preemptible: false``)."""
    return running(key, on, gpu, preemptible=False, **kw)


def vc(name: str, guaranteed: Amount = 0, max: Amount = None, *, lending: Amount = None,
       reclaim: Reclaim = Reclaim.ANY, within: WithinVc = WithinVc.LOWER_PRIORITY,
       while_borrowing: int | None = None, strict_fifo: bool = False, user_gpu: int | None = None) -> VcQuota:
    """``guaranteed=8``: 8 GPU with the CPU and memory of the default node that go with them (4 CPU and 32,000 MB
    per GPU); ``max=8`` and ``lending=8`` limit GPUs only. Tuples are exact."""
    wb = WhileBorrowing(True, while_borrowing) if while_borrowing is not None else WhileBorrowing()
    g = Resources(guaranteed, 4 * guaranteed, 32_000 * guaranteed) if isinstance(guaranteed, int) else res(guaranteed)
    return VcQuota(name=name, guaranteed=g or Resources(), max=res(max), lending_limit=res(lending),
                   preemption=PreemptionPolicy(reclaim, within, wb), strict_fifo=strict_fifo, user_gpu_limit=user_gpu)


def snap(nodes: list[NodeView], pending: list[PendingJob] | tuple[PendingJob, ...] = (),
         running: list[RunningJob] | tuple[RunningJob, ...] = (), vcs: list[VcQuota] | None = None,
         now: float = 100.0, **config: Any) -> Snapshot:
    """Nodes' ``used`` gets the tasks of ``running`` added, as the launcher does."""
    extra: dict[str, Resources] = {}
    for r in running:
        for t, n in r.tasks:
            extra[n] = extra.get(n, Resources()) + t.resources
    nodes = [replace(n, used=n.used + extra[n.name]) if n.name in extra else n for n in nodes]
    return Snapshot(now=now, nodes=tuple(nodes), vcs=tuple(vcs) if vcs is not None else (VcQuota("default"),),
                    running=tuple(running), pending=tuple(pending), config=SchedulerConfig(**config))


def admitted(d: Decision) -> dict[str, dict[str, str]]:
    """``{job: {"role-index": node}}`` of the admissions."""
    return {a.job: {f"{p.role}-{p.index}": p.node for p in a.placements} for a in d.admissions}


def resizes(d: Decision) -> dict[str, tuple[int, int]]:
    """``{job: (size from, size to)}`` of the resizes (role ``main``)."""
    return {z.job: (z.size_from, z.size_to) for z in d.resizes}


def codes(d: Decision) -> dict[str, str]:
    return {k: r.code for k, r in d.waiting.items()}


def victims(d: Decision) -> dict[str, str]:
    """``{victim: preemptor}``."""
    return {p.victim: p.preemptor for p in d.preemptions}


@dataclass
class AdmitCase:
    """A named case: which jobs a pass admits, and the reason code of each job that waits."""

    name: str
    snapshot: Snapshot
    admitted: set[str]
    waiting: dict[str, str] = field(default_factory=dict)
