"""Binding: turn the scheduler's placements into concrete GPU indices and port numbers per node.

Pure: the used ports and GPUs of every node come in, and nothing is handed out twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pai.domain.job import Task
from pai.domain.jobspec import TaskRoleSpec
from pai.domain.node import Node


class BindingError(Exception):
    """A node cannot supply the ports or GPUs a placement asked for (the snapshot was stale)."""

    def __init__(self, node: str, what: str) -> None:
        super().__init__(f"node {node}: {what}")
        self.node = node
        self.what = what


@dataclass
class NodeLedger:
    """The ports and GPUs already handed out on one node."""

    node: Node
    ports: set[int] = field(default_factory=set)
    gpus: set[int] = field(default_factory=set)

    def take_gpus(self, n: int) -> tuple[int, ...]:
        free = [
            g for g in range(self.node.total.gpu) if g not in self.gpus and g not in self.node.failed_gpus
        ]
        if len(free) < n:
            raise BindingError(self.node.name, f"needs {n} GPUs, {len(free)} free")
        chosen = tuple(free[:n])
        self.gpus.update(chosen)
        return chosen

    def take_ports(self, n: int, begin_at: int = 0) -> tuple[int, ...]:
        lo, hi = self.node.port_range
        start = begin_at if begin_at > 0 else lo
        out: list[int] = []
        p = start
        limit = max(hi, start + n)
        while len(out) < n and p <= limit:
            if p not in self.ports:
                out.append(p)
            p += 1
        if len(out) < n:
            raise BindingError(self.node.name, f"needs {n} ports from {start}, range exhausted")
        self.ports.update(out)
        return tuple(out)


def ledgers(nodes: Iterable[Node], active_tasks: Iterable[Task]) -> dict[str, NodeLedger]:
    """One ledger per node, filled with what the active tasks hold."""
    out = {n.name: NodeLedger(n) for n in nodes}
    for t in active_tasks:
        if t.node in out:
            led = out[t.node]
            for ports in t.ports.values():
                led.ports.update(ports)
            led.gpus.update(t.gpus)
    return out


def bind_task(ledger: NodeLedger, role: TaskRoleSpec) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
    """Ports (``http``, ``ssh`` and the role's own labels) and GPU indices for one task on this node."""
    ports = {p.label: ledger.take_ports(p.count, p.begin_at) for p in role.all_ports()}
    gpus = ledger.take_gpus(role.resources.gpu)
    return ports, gpus
