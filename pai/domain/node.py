"""Nodes: worker machines as the master knows them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from pai.domain.resources import Resources


class NodeState(StrEnum):
    READY = "READY"
    LOST = "LOST"  # no heartbeat within the timeout
    CORDONED = "CORDONED"  # an operator keeps new work off it
    DRAINING = "DRAINING"  # cordoned, and running work is being moved off
    UNHEALTHY = "UNHEALTHY"  # the agent reports a fault

    def schedulable(self) -> bool:
        return self is NodeState.READY


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    address: str
    total: Resources
    gpu_type: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    state: NodeState = NodeState.READY
    last_heartbeat: float = 0.0
    port_range: tuple[int, int] = (20000, 40000)
    failed_gpus: tuple[int, ...] = ()
    log_port: int = 0  # the agent's log server: http://address:log_port/logs/...
    # What an admin set (CORDONED or DRAINING), kept while the node is LOST and restored when it is back.
    admin_state: NodeState | None = None
    problems: tuple[str, ...] = ()  # health problems the agent reports; a node with any gets nothing new
    gpu_memory_mb: int = 0  # per GPU, as the agent's NVML reports it; 0 when unknown

    def schedulable(self) -> bool:
        """Whether new tasks may be placed here: the one rule (state and health)."""
        return self.state.schedulable() and not self.problems

    def back_from_lost(self) -> NodeState:
        return self.admin_state or NodeState.READY


def sku_types(nodes: Iterable[Node]) -> dict[str, Resources]:
    """OpenPAI's SKU types: per GPU type the nodes report, what one GPU comes with (its node's CPUs and memory
    divided by its GPUs, the least over the nodes of that type); ``extras...skuType`` names one. Nodes without
    GPUs or without a GPU type have none."""
    out: dict[str, Resources] = {}
    for n in nodes:
        if not n.gpu_type or n.total.gpu <= 0:
            continue
        unit = Resources(1, n.total.cpu // n.total.gpu, n.total.memory_mb // n.total.gpu)
        seen = out.get(n.gpu_type)
        out[n.gpu_type] = unit if seen is None else Resources(1, min(seen.cpu, unit.cpu),
                                                              min(seen.memory_mb, unit.memory_mb))
    return dict(sorted(out.items()))
