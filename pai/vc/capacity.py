"""Free capacity of every node during a pass, indexed by free GPU count for best-fit search.

Nodes live in buckets ``[gpu_type][free_gpus]``; a best-fit search walks the buckets from the task's GPU count
upward and stops at the first node whose CPU, memory, ports, labels and holds also fit, so the cost of a
placement depends on the number of bucket levels, not on the number of nodes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from pai.vc.gang import Need, Selector
from pai.vc.snapshot import NodeView


class Cap(Protocol):
    """A per-node limit on what one placement may add besides free capacity (pai.vc.node_lending's cap on borrowed
    work): ``best_fit`` skips the nodes it refuses; ``place`` tells it what it holds and gives back."""

    def allows(self, i: int, need: Need) -> bool: ...

    def take(self, i: int, need: Need) -> None: ...

    def give(self, i: int, need: Need) -> None: ...


class NodePool:
    """Mutable free capacity of the nodes of one snapshot (index ``i`` = position in ``nodes``)."""

    def __init__(self, nodes: Sequence[NodeView], *, empty: bool = False) -> None:
        self.nodes = tuple(nodes)
        self.names = [v.name for v in nodes]
        self.index = {v.name: i for i, v in enumerate(nodes)}
        self.gpu_type = [v.gpu_type for v in nodes]
        self.labels = [v.labels for v in nodes]
        self.total_gpu = [v.usable.gpu for v in nodes]
        self.total_cpu = [v.total.cpu for v in nodes]
        self.total_mem = [v.total.memory_mb for v in nodes]
        self.free_gpu = list(self.total_gpu) if empty else [v.usable.gpu - v.used.gpu for v in nodes]
        self.free_cpu = list(self.total_cpu) if empty else [v.total.cpu - v.used.cpu for v in nodes]
        self.free_mem = list(self.total_mem) if empty else [v.total.memory_mb - v.used.memory_mb for v in nodes]
        self.free_ports = [1_000_000 if empty else v.free_ports for v in nodes]
        self.tasks_on = [0] * len(nodes)
        self.pinned = [0] * len(nodes)  # tasks of non-preemptible work on the node (State counts them)
        # node -> tasks of running whole-node work on it (State counts them; such a node is closed while any run)
        self.whole: dict[int, int] = {}
        # The empty pool answers "could this ever fit?": every node, free and open.
        self._schedulable = [True] * len(nodes) if empty else [v.schedulable for v in nodes]
        self.open = list(self._schedulable)
        self.held: dict[int, tuple[str, int]] = {}  # node -> (job key, priority) of a reservation
        self.max_gpu = max(self.total_gpu, default=0)
        self.types: list[str | None] = sorted({v.gpu_type for v in nodes}, key=lambda t: (t is not None, t or ""))
        self._buckets: dict[str | None, list[dict[int, None]]] = {
            t: [{} for _ in range(self.max_gpu + 1)] for t in self.types
        }
        for i in range(len(nodes)):
            if self.open[i]:
                self._buckets[self.gpu_type[i]][self._level(self.free_gpu[i])][i] = None
        self._unordered: set[tuple[str | None, int]] = set()  # buckets a node joined since ``in_order``

    def _level(self, free_gpu: int) -> int:
        return min(max(free_gpu, 0), self.max_gpu)

    # ---- changes -------------------------------------------------------------------------------------------

    def take(self, i: int, gpu: int, cpu: int, mem: int, ports: int, tasks: int = 1) -> None:
        old = self.free_gpu[i]
        self.free_gpu[i] = old - gpu
        self.free_cpu[i] -= cpu
        self.free_mem[i] -= mem
        self.free_ports[i] -= ports
        self.tasks_on[i] += tasks
        self._moved(i, old)

    def give(self, i: int, gpu: int, cpu: int, mem: int, ports: int, tasks: int = 1) -> None:
        self.take(i, -gpu, -cpu, -mem, -ports, -tasks)

    def _moved(self, i: int, old_gpu: int) -> None:
        if not self.open[i]:
            return
        a, b = self._level(old_gpu), self._level(self.free_gpu[i])
        if a != b:
            buckets = self._buckets[self.gpu_type[i]]
            del buckets[a][i]
            buckets[b][i] = None
            self._unordered.add((self.gpu_type[i], b))

    def in_order(self) -> None:
        """Put every bucket a node joined back in node order, as a new pool has them: ties between equally full
        nodes are then broken the same way whatever happened before (an incremental pass decides what a full
        pass on the same state decides). Costs the buckets touched since the last call."""
        for t, level in self._unordered:
            bucket = self._buckets[t][level]
            self._buckets[t][level] = dict.fromkeys(sorted(bucket))
        self._unordered.clear()

    def close(self, i: int) -> None:
        """No new work on node ``i`` (whole-node tasks, exclusive jobs)."""
        if self.open[i]:
            del self._buckets[self.gpu_type[i]][self._level(self.free_gpu[i])][i]
            self.open[i] = False

    def reopen(self, i: int) -> None:
        if not self.open[i] and self._schedulable[i]:
            self.open[i] = True
            level = self._level(self.free_gpu[i])
            self._buckets[self.gpu_type[i]][level][i] = None
            self._unordered.add((self.gpu_type[i], level))

    def add_whole(self, i: int, tasks: int) -> None:
        """``tasks`` (negative: fewer) tasks of running whole-node work on node ``i``: closed while any run, open
        again when the last one leaves."""
        left = self.whole.get(i, 0) + tasks
        if left > 0:
            self.whole[i] = left
            self.close(i)
        else:
            self.whole.pop(i, None)
            self.reopen(i)

    # ---- queries -------------------------------------------------------------------------------------------

    def idle(self, i: int) -> bool:
        return (self.tasks_on[i] == 0 and self.free_gpu[i] == self.total_gpu[i]
                and self.free_cpu[i] == self.total_cpu[i] and self.free_mem[i] == self.total_mem[i])

    def matches(self, i: int, gpu_type: str | None, selector: Selector) -> bool:
        if gpu_type is not None and self.gpu_type[i] != gpu_type:
            return False
        labels = self.labels[i]
        return all(labels.get(k) == v for k, v in selector)

    def candidates(self, gpu: int, gpu_type: str | None) -> Iterator[int]:
        """Open nodes with at least ``gpu`` free GPUs of the type, fullest (fewest free GPUs) first."""
        types = self.types if gpu_type is None else ([gpu_type] if gpu_type in self._buckets else [])
        for level in range(max(gpu, 0), self.max_gpu + 1):
            for t in types:
                yield from self._buckets[t][level]

    def best_fit(self, need: Need, job: str, priority: int, *, exclusive: bool = False,
                 ignore_holds: bool = False, cap: Cap | None = None) -> int | None:
        """The fullest open node where ``need`` fits now (and ``cap`` allows it), or None."""
        fc, fm, fp, held = self.free_cpu, self.free_mem, self.free_ports, self.held
        cpu, mem, ports, sel = need.cpu, need.mem, need.ports, need.selector
        for i in self.candidates(need.gpu, need.gpu_type):
            if fc[i] < cpu or fm[i] < mem or fp[i] < ports:
                continue
            if sel and not self.matches(i, None, sel):
                continue
            if exclusive and not self.idle(i):
                continue
            if held and not ignore_holds and i in held:
                owner, prio = held[i]
                if owner != job and priority <= prio:
                    continue
            if cap is not None and not cap.allows(i, need):  # checked last: only nodes that fit otherwise
                continue
            return i
        return None

    def fits(self, i: int, need: Need, job: str, priority: int, *, exclusive: bool = False,
             ignore_holds: bool = False) -> bool:
        """The checks of ``best_fit`` for one node (for explanations; best_fit inlines them)."""
        if not self.open[i] or self.free_gpu[i] < need.gpu or not self.matches(i, need.gpu_type, need.selector):
            return False
        if self.free_cpu[i] < need.cpu or self.free_mem[i] < need.mem or self.free_ports[i] < need.ports:
            return False
        if exclusive and not self.idle(i):
            return False
        if not ignore_holds and i in self.held:
            owner, prio = self.held[i]
            return owner == job or priority > prio
        return True

    def emptiest(self, gpu_type: str | None) -> Iterator[int]:
        """Open nodes of the type, most free GPUs first."""
        types = self.types if gpu_type is None else ([gpu_type] if gpu_type in self._buckets else [])
        for level in range(self.max_gpu, -1, -1):
            for t in types:
                yield from self._buckets[t][level]

    def closed_for_whole(self, i: int) -> bool:
        """Closed only because whole-node work runs there (it frees when that work leaves)."""
        return i in self.whole and self._schedulable[i]

    def whole_nodes(self, gpu_type: str | None) -> Iterator[int]:
        """Schedulable nodes of the type closed by running whole-node work (victim search looks there too). Read it
        before changing the pool (the dict is not copied)."""
        for i in self.whole:
            if self._schedulable[i] and (gpu_type is None or self.gpu_type[i] == gpu_type):
                yield i

    def count_open(self, gpu: int, gpu_type: str | None) -> int:
        """How many open nodes have at least ``gpu`` free GPUs of the type (a cheap upper bound for a gang)."""
        types = self.types if gpu_type is None else ([gpu_type] if gpu_type in self._buckets else [])
        return sum(len(self._buckets[t][level]) for level in range(max(gpu, 0), self.max_gpu + 1) for t in types)
