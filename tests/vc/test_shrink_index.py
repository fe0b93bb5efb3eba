"""The shrink search's lazy index and its shortcuts decide exactly as the straightforward search: an index over every
running job's parts (each elastic job split, every other job copied as not a victim), built whole, and no shortcut."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from pai.domain.resources import Resources
from pai.vc import Decision, NodeView, PendingJob, RunningJob, Snapshot, TaskRequest, VcQuota, schedule
from pai.vc import round as round_module
from pai.vc.capacity import NodePool
from pai.vc.elastic_shrink import Shrinker, parent
from pai.vc.fairshare import FairShare
from pai.vc.incremental import IncrementalScheduler
from pai.vc.ledger import VcLedger
from pai.vc.policy import PreemptionPolicy, Reclaim, SchedulerConfig
from pai.vc.preemption import Planner
from pai.vc.search import NodeSearch, Search
from pai.vc.shrink_index import is_piece, split
from pai.vc.snapshot import ElasticRole
from pai.vc.state import State
from pai.vc.victims import VictimIndex
from tests.vc.test_properties import elastic_snapshots, snapshots


class EagerShrinker(Shrinker):
    """The search as first written: every part indexed up front, every node examined."""

    def __init__(self, state: State, pool: NodePool, vcs: dict[str, VcLedger], main: Planner, *, now: float,
                 fair: FairShare | None) -> None:
        super().__init__(state, pool, vcs, main, now=now, fair=fair)
        parts: list[RunningJob] = []
        for r in state.index.jobs.values():
            if r.elastic and r.preemptible and not r.preempting:
                parts.extend(split(r, state.exclusive(r)))
            else:
                parts.append(replace(r, preemptible=r.preempting and r.preemptible, whole_nodes=state.exclusive(r)))
        self.index = VictimIndex(parts, pool.index, lambda j: j.whole_nodes)
        self.any = any(is_piece(p.key) for p in parts)

    def rule(self, victim: RunningJob, s: Search, local: dict[str, Resources] | None = None) -> str | None:
        if is_piece(victim.key) and parent(victim.key) in self.claimed and parent(victim.key) not in self.shrunk:
            return None
        return Planner.rule(self, victim, s, local)

    _cheapest_node = NodeSearch._cheapest_node
    _victims_on = NodeSearch._victims_on


@contextmanager
def eager() -> Iterator[None]:
    names = vars(round_module)  # the class the pass makes its shrink search of
    names["Shrinker"] = EagerShrinker
    try:
        yield
    finally:
        names["Shrinker"] = Shrinker


def both(s: Snapshot) -> tuple[Decision, Decision]:
    with eager():
        expected = schedule(s)
    return schedule(s), expected


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(elastic_snapshots())
def test_shrinks_as_the_eager_search(s: Snapshot) -> None:
    got, expected = both(s)
    assert got == expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(elastic=True))
def test_decides_as_the_eager_search(s: Snapshot) -> None:
    got, expected = both(s)
    assert got == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(fair=True, elastic=True))
def test_decides_as_the_eager_search_with_fair_sharing(s: Snapshot) -> None:
    got, expected = both(s)
    assert got == expected


def big(seed: int, nodes: int = 200) -> Snapshot:
    """More nodes than a search examines: half the VCs borrow all of it (gangs on whole nodes, 1-GPU jobs; 30 % of
    them elastic and above their minimum, some leaving), the others' jobs reclaim."""
    rnd = random.Random(seed)
    vcs = tuple(VcQuota(f"vc{k}", Resources(8 * nodes // 4, 32 * nodes // 4, 64_000 * nodes // 4)) for k in range(4))
    running: list[RunningJob] = []
    for g in range(nodes // 2 // 8):
        tasks = tuple((TaskRequest("worker", i, Resources(8, 32, 64_000)), f"n{8 * g + i}") for i in range(8))
        running.append(RunningJob(f"g{g}", rnd.choice(["vc0", "vc1"]), "u", rnd.choice([10, 100]),
                                  float(rnd.randrange(1000)), tasks, whole_nodes=True,
                                  elastic=(ElasticRole("worker", 2, 8),) if rnd.random() < 0.3 else (),
                                  preempting=rnd.random() < 0.05))
    for n in range(nodes // 2 // 8 * 8, nodes):
        for k in range(8):
            task = (TaskRequest("main", 0, Resources(1, 4, 8_000)), f"n{n}")
            elastic = rnd.random() < 0.3
            tasks = (task, (TaskRequest("main", 1, Resources(1, 4, 8_000)), f"n{n}")) if elastic and k < 7 else (task,)
            running.append(RunningJob(f"s{n}-{k}", rnd.choice(["vc0", "vc1"]), "u", rnd.choice([-1, 10, 100]),
                                      float(rnd.randrange(1000)), tasks,
                                      elastic=(ElasticRole("main", 1, 4),) if elastic else ()))
    used: dict[str, Resources] = {}
    for r in running:
        for t, node in r.tasks:
            used[node] = used.get(node, Resources(0, 0, 0)) + t.resources
    pending = []
    for k in range(nodes):
        gang = rnd.random() < 0.1
        count, gpu = (rnd.choice([2, 4]), 8) if gang else (1, 1)
        pending.append(PendingJob(f"p{k}", rnd.choice(["vc2", "vc3", "vc0"]), "u", rnd.choice([10, 100]),
                                  2000.0 + k, tuple(TaskRequest("main", i, Resources(gpu, 4, 8_000))
                                                    for i in range(count))))
    node_views = tuple(NodeView(f"n{i}", Resources(8, 32, 64_000), used.get(f"n{i}", Resources(0, 0, 0)))
                       for i in range(nodes))
    return Snapshot(now=5000.0, nodes=node_views, vcs=vcs, running=tuple(running), pending=tuple(pending))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_large_cluster_decides_as_the_eager_search(seed: int) -> None:
    s = big(seed)
    got, expected = both(s)
    assert got.resizes, "the cluster is meant to shrink elastic jobs"
    assert got == expected


def test_incremental_passes_decide_as_the_eager_search() -> None:
    """The splits kept on the State between passes: jobs finish, arrive and are preempted (or shrunk)."""
    def passes() -> list[Decision]:
        s = big(4, nodes=160)
        inc = IncrementalScheduler(replace(s, pending=s.pending[:40]))
        out = [inc.schedule(s.now, full=True)]
        for k, job in enumerate(s.pending[40:60]):
            inc.submit(job)
            if k % 3 == 0:
                inc.finished(sorted(inc.running)[k * 7 % len(inc.running)])
            out.append(inc.schedule(s.now + k + 1, full=k % 5 == 4))
        return out

    with eager():
        expected = passes()
    got = passes()
    assert any(d.resizes for d in got)
    assert got == expected


def test_a_leaving_part_holds_whole_nodes_as_in_the_pass() -> None:
    """A shrink's leaving tasks (the launcher's ``<job>\\x1fleaving``, a key with the pieces' separator) held whole
    nodes by the cluster rule: once taken, the node is open to the shrink beside them."""
    def task(role: str, i: int, node: str) -> tuple[TaskRequest, str]:
        return TaskRequest(role, i, Resources(4, 4, 4_000)), node

    leaving = RunningJob("e\x1fleaving", "b", "u", 10, 0.0, (task("worker", 1, "n0"), task("worker", 2, "n1")),
                         preempting=True)
    shrinkable = RunningJob("f", "b", "u", 10, 0.0, (task("main", 0, "n1"), task("main", 1, "n0")),
                            elastic=(ElasticRole("main", 1, 2),))
    full = Resources(8, 8, 8_000)
    s = Snapshot(now=100.0, nodes=(NodeView("n0", Resources(8, 32, 64_000), full),
                                   NodeView("n1", Resources(8, 32, 64_000), full)),
                 vcs=(VcQuota("a", Resources(8, 32, 64_000), preemption=PreemptionPolicy(Reclaim.ANY)),
                      VcQuota("b", Resources(0, 0, 0))),
                 running=(leaving, shrinkable),
                 pending=(PendingJob("p", "a", "u", 10, 50.0, (TaskRequest("main", 0, Resources(8, 4, 4_000)),)),),
                 config=SchedulerConfig(whole_nodes_for_multi_node_gpu=True, min_run_seconds=0.0))
    got, expected = both(s)
    assert [(z.job, z.size_to) for z in got.resizes] == [("f", 1)]
    assert got == expected
