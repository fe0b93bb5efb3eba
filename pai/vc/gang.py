"""A job's tasks as the placer sees them: plain integer needs, biggest first, with a hashable shape."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pai.domain.resources import Resources
from pai.vc.snapshot import TaskRequest

Selector = tuple[tuple[str, str], ...]
# (gpu, cpu, memory_mb, ports, gpu_type, node_selector): what one task needs from one node.
Kind = tuple[int, int, int, int, str | None, Selector]


@dataclass(frozen=True, slots=True)
class Need:
    role: str
    index: int
    gpu: int
    cpu: int
    mem: int
    ports: int
    gpu_type: str | None
    selector: Selector

    @property
    def kind(self) -> Kind:
        return (self.gpu, self.cpu, self.mem, self.ports, self.gpu_type, self.selector)

    @property
    def resources(self) -> Resources:
        return Resources(self.gpu, self.cpu, self.mem)

    @classmethod
    def of(cls, t: TaskRequest) -> Need:
        r = t.resources
        return cls(t.role, t.index, r.gpu, r.cpu, r.memory_mb, t.ports, t.gpu_type, tuple(sorted(t.node_selector)))

    def describe(self) -> str:
        gpu = f"{self.gpu} GPU" + (f" of type {self.gpu_type}" if self.gpu_type else "")
        return f"{gpu}, {self.cpu} CPU, {self.mem} MB"


@dataclass(frozen=True, slots=True)
class Gang:
    """All tasks of one job, placed together or not at all."""

    needs: tuple[Need, ...]  # biggest first: the hardest tasks are placed first
    shape: tuple[tuple[Kind, int], ...]  # each kind of need with its count; equal shapes place alike
    exclusive: bool  # every task takes a whole node
    request: Resources

    @classmethod
    def of(cls, tasks: Iterable[TaskRequest], whole_nodes_for_multi_node_gpu: bool = False, *,
           whole_nodes: bool = False) -> Gang:
        """``whole_nodes``: the job asks for whole nodes (``extras.wholeNodes``); the cluster rule
        ``wholeNodesForMultiNodeGpu`` gives them to jobs of two or more GPU tasks."""
        needs = sorted((Need.of(t) for t in tasks), key=lambda n: (-n.gpu, -n.cpu, -n.mem, -n.ports, n.role, n.index))
        counts: dict[Kind, int] = {}
        request = Resources()
        for n in needs:
            counts[n.kind] = counts.get(n.kind, 0) + 1
            request = request + n.resources
        exclusive = takes_whole_nodes(whole_nodes, sum(1 for n in needs if n.gpu > 0), whole_nodes_for_multi_node_gpu)
        shape = tuple(sorted(counts.items(), key=repr))
        return cls(tuple(needs), shape, exclusive, request)

    @property
    def key(self) -> tuple[tuple[tuple[Kind, int], ...], bool]:
        return (self.shape, self.exclusive)


def takes_whole_nodes(asked: bool, gpu_tasks: int, whole_nodes_for_multi_node_gpu: bool) -> bool:
    """Does every task of a job take a whole node (nothing else beside it)? When the job asks for it, or when the
    cluster gives whole nodes to jobs of two or more GPU tasks. The one rule, for waiting and running jobs."""
    return asked or (whole_nodes_for_multi_node_gpu and gpu_tasks >= 2)
