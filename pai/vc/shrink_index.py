"""The shrink search's victim index (pai.vc.elastic_shrink), a view of the pass's own index made as it is read.

The shrink search sees each running elastic job (preemptible, not leaving) as its core, never a victim, and one piece
per task above its minimum; every other job as not a victim, unless it is leaving (its capacity may be used). Only the
pieces and the jobs being stopped can be victims there, so only they are new objects: every other job is the pass's
own object (``Shrinker.rule`` refuses it), and a node's list or a VC's is made when the search first reads it. Each
job is split once, when first read, and the split is kept by key on the State (``State.shrink_parts``) until the job
changes. Nodes' and VCs' lists are those the index built over every part would hold, in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pai.vc.snapshot import RunningJob
from pai.vc.victims import OnNode, VictimIndex, node_shares, victim_order

SEP = "\x1f"  # piece keys: job, role, index (the index counted down, so the highest comes first in victim order)
_TOP = 10**7


def is_piece(key: str) -> bool:
    return SEP in key


def splits(job: RunningJob) -> bool:
    """Is the running job seen in pieces: elastic, preemptible and not leaving?"""
    return bool(job.elastic) and job.preemptible and not job.preempting


def split(job: RunningJob, exclusive: bool) -> list[RunningJob]:
    """The job as its core (its lowest ``min_instances`` tasks of each role, and every task of other roles; never a
    victim here) and one piece per task above the minimum, highest index first."""
    floors = {e.role: e.min_instances for e in job.elastic}
    seen: dict[str, int] = {}
    core, pieces = [], []
    for t, node in sorted(job.tasks, key=lambda tn: (tn[0].role, tn[0].index)):
        seen[t.role] = n = seen.get(t.role, 0) + 1
        if n <= floors.get(t.role, n):
            core.append((t, node))
        else:
            key = f"{job.key}{SEP}{t.role}{SEP}{_TOP - t.index:08d}"
            pieces.append(replace(job, key=key, tasks=((t, node),), whole_nodes=exclusive))
    return [replace(job, tasks=tuple(core), preemptible=False, whole_nodes=exclusive), *pieces]


def _entry_order(entry: OnNode) -> tuple[bool, int, float, str]:
    """On a node: jobs already being stopped first, then victim order (pai.vc.victims)."""
    return (not entry[0].preempting, *victim_order(entry[0]))


def _above_minimum(job: RunningJob) -> bool:
    """Does some role of the elastic job run more tasks than its minimum (so that it has pieces)?"""
    floors = {e.role: e.min_instances for e in job.elastic}  # as ``split`` reads them
    counts: dict[str, int] = {}
    for t, _ in job.tasks:
        counts[t.role] = counts.get(t.role, 0) + 1
    return any(counts.get(role, 0) > floor for role, floor in floors.items())


@dataclass(slots=True)
class Split:
    """A split job: the job it was made of, its core's share of each node, its pieces and their share of each."""

    job: RunningJob
    core_on: dict[int, list[int]]
    pieces: list[RunningJob]
    pieces_on: dict[int, list[OnNode]]


def make_split(job: RunningJob, whole: bool, node_index: dict[str, int]) -> Split:
    core, *pieces = split(job, whole)
    pieces_on: dict[int, list[OnNode]] = {}
    for p in pieces:
        for i, (g, c, m, k) in node_shares(p, node_index).items():
            pieces_on.setdefault(i, []).append((p, g, c, m, k))
    return Split(job, node_shares(core, node_index), pieces, pieces_on)


class ShrinkIndex(VictimIndex):
    """The view over ``main`` (the pass's index); ``splits``: the kept splits, by job key. Read-only: a pass's index
    does not change while the pass runs, and each pass makes its own view."""

    def __init__(self, main: VictimIndex, splits: dict[str, Split]) -> None:
        self.main = main
        self.jobs = main.jobs
        self.node_index = main.node_index
        # a piece holds whole nodes as its job does (``whole_nodes`` set so; one task: the cluster rule adds nothing)
        self.whole: Callable[[RunningJob], bool] = main.whole
        self.preempted_for = main.preempted_for  # jobs being stopped: themselves (their rule is the usual one)
        self.pinned = main.pinned
        self.oppo = main.oppo  # a VC has oppo work not leaving here exactly where it has in the pass's index
        self.splits = splits
        self._victim_nodes: set[int] | None = None
        self._by_vc = {}
        self._on_node = {}
        if len(splits) > 2 * len(main.jobs) + 64:  # jobs that changed or ended since their split: drop them
            for key in [k for k, s in splits.items() if main.jobs.get(k) is not s.job]:
                del splits[key]

    def split_of(self, job: RunningJob) -> Split:
        s = self.splits.get(job.key)
        if s is None or s.job is not job:
            s = self.splits[job.key] = make_split(job, self.main.whole(job), self.node_index)
        return s

    def any_piece(self) -> bool:
        """Is some running elastic job above its minimum (so that a shrink search may find a victim)?"""
        return any(splits(r) and _above_minimum(r) for r in self.jobs.values())

    def victim_nodes(self) -> set[int]:
        """The nodes where some part may be a victim (a piece, or a job being stopped): on any other, the shrink
        search finds no victim."""
        if self._victim_nodes is None:
            index = self.node_index
            nodes = {index[n] for jobs in self.preempted_for.values() for r in jobs for _, n in r.tasks if n in index}
            for r in self.jobs.values():
                if splits(r) and _above_minimum(r):
                    nodes.update(self.split_of(r).pieces_on)
            self._victim_nodes = nodes
        return self._victim_nodes

    def by_vc(self, vc: str) -> list[RunningJob]:
        """The VC's pieces in victim order (no other job of the VC is a victim in the shrink search)."""
        out = self._by_vc.get(vc) if self._by_vc is not None else None
        if out is None:
            out = sorted((p for r in self.main.by_vc(vc) if splits(r) for p in self.split_of(r).pieces),
                         key=victim_order)
            assert self._by_vc is not None
            self._by_vc[vc] = out
        return out

    def on_node(self, i: int) -> list[OnNode]:
        """The parts on node ``i``: each split job's core and pieces there, every other job as it is."""
        out = self._on_node.get(i) if self._on_node is not None else None
        if out is None:
            out = []
            for entry in self.main.on_node(i):
                r = entry[0]
                if not splits(r):
                    out.append(entry)
                    continue
                s = self.split_of(r)
                core = s.core_on.get(i)
                if core is not None:
                    out.append((r, core[0], core[1], core[2], core[3]))  # its own object: Shrinker.rule refuses it
                out.extend(s.pieces_on.get(i, ()))
            out.sort(key=_entry_order)  # as the index over every part orders them
            assert self._on_node is not None
            self._on_node[i] = out
        return out

    def add(self, job: RunningJob) -> None:
        raise TypeError("a ShrinkIndex is a read-only view")

    def remove(self, key: str) -> RunningJob | None:
        raise TypeError("a ShrinkIndex is a read-only view")
