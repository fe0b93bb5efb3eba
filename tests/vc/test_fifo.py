"""One VC, FIFO by priority then age, whole gangs, no head-of-line blocking."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pai.vc import Snapshot, schedule
from tests.vc.vc_builders import admitted, codes, job, node, nodes, running, snap


@dataclass
class Case:
    name: str
    snapshot: Snapshot
    admitted: set[str]
    waiting: dict[str, str] = field(default_factory=dict)  # job -> code


CASES = [
    Case("higher priority first, then older first",
         snap([node("n0", 8)], [job("a", 4, priority=10, at=1), job("b", 4, priority=100, at=2),
                                job("c", 4, priority=10, at=0)]),
         {"b", "c"}, {"a": "NoNodeFits"}),
    Case("a job that does not fit does not block smaller jobs behind it",
         snap([node("n0", 8)], [job("big", 8, at=0), job("small", 2, at=1)], [running("r", "n0", 4)]),
         {"small"}, {"big": "NoNodeFits"}),
    Case("running jobs use capacity",
         snap([node("n0", 8)], [job("a", 5)], [running("r", "n0", 4)]),
         set(), {"a": "NoNodeFits"}),
    Case("jobs admitted earlier in the pass use capacity",
         snap([node("n0", 8)], [job("a", 5, at=0), job("b", 5, at=1), job("c", 3, at=2)]),
         {"a", "c"}, {"b": "NoNodeFits"}),
    Case("a gang is placed whole or not at all",
         snap(nodes(3, prefix="n-"), [job("gang", 6, instances=3), job("single", 6, at=1)], [running("r", "n-0", 4)]),
         {"single"}, {"gang": "NoNodeFits"}),
    Case("a gang across several nodes",
         snap(nodes(3), [job("gang", 8, instances=3)]),
         {"gang"}),
    Case("a non-schedulable node gets nothing",
         snap([node("n0", schedulable=False), node("n1", 2)], [job("a", 4), job("b", 2, at=1)]),
         {"b"}, {"a": "NoNodeFits"}),
    Case("CPU must fit on the same node as the GPUs",
         snap([node("n0", 8, cpu=16), node("n1", 0, cpu=64)], [job("a", 1, cpu=8)], [running("r", "n0", 1, cpu=9)]),
         set(), {"a": "NoNodeFits"}),
    Case("a task that needs more CPU than any node has is NeverFits",
         snap([node("n0", 8, cpu=4), node("n1", 0, cpu=64)], [job("a", 1, cpu=8)]),
         set(), {"a": "NeverFits"}),
    Case("memory must fit",
         snap([node("n0", 8, mem=1000)], [job("a", 1, mem=2000), job("b", 1, mem=1000, at=1)]),
         {"b"}, {"a": "NeverFits"}),
    Case("ports must fit",
         snap([node("n0", 8, free_ports=3)], [job("a", 1, ports=2, instances=2), job("b", 1, ports=3, at=1)]),
         {"b"}, {"a": "NoNodeFits"}),
    Case("GPU type is honoured",
         snap([node("k80", gpu_type="K80"), node("a100", 4, gpu_type="A100")],
              [job("a", 4, gpu_type="A100"), job("b", 2, gpu_type="A100", at=1)], [running("r", "a100", 1)]),
         {"b"}, {"a": "NoNodeFits"}),
    Case("node labels are honoured",
         snap([node("n0"), node("n1", labels={"zone": "b"})], [job("a", 8, selector={"zone": "b"})],
              [running("r", "n1", 1)]),
         set(), {"a": "NoNodeFits"}),
    Case("failed GPUs reduce a node's total",
         snap([node("n0", 8, failed_gpus=2)], [job("a", 7), job("b", 6, at=1)]),
         {"b"}, {"a": "NeverFits"}),
    Case("NodeView.used counts besides running jobs",
         snap([node("n0", 8, used=(3, 0, 0))], [job("a", 6), job("b", 5, at=1)]),
         {"b"}, {"a": "NoNodeFits"}),
    Case("a job larger than any node is NeverFits",
         snap(nodes(4), [job("huge", 16), job("ok", 8, at=1)]),
         {"ok"}, {"huge": "NeverFits"}),
    Case("a gang larger than the cluster is NeverFits",
         snap(nodes(2, prefix="n-"), [job("huge", 8, instances=3)]),
         set(), {"huge": "NeverFits"}),
    Case("a job of an unknown VC waits",
         snap(nodes(1), [job("a", 1, vc="nope")]),
         set(), {"a": "UnknownVc"}),
    Case("CPU-only jobs run",
         snap(nodes(1), [job("cpu", 0, cpu=30)]),
         {"cpu"}),
    Case("a job with no tasks is admitted with no placements",
         snap(nodes(1), [job("none", roles=())]),
         {"none"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fifo(case: Case) -> None:
    d = schedule(case.snapshot)
    assert set(admitted(d)) == case.admitted
    assert codes(d) == case.waiting
    assert not d.preemptions


def test_waiting_jobs_carry_their_position_in_the_vc_queue() -> None:
    d = schedule(snap([node("n0", 2)], [job(k, 4, at=i) for i, k in enumerate("abc")] + [job("d", 2, at=9)]))
    assert set(admitted(d)) == {"d"}
    assert {k: r.position for k, r in d.waiting.items()} == {"a": 1, "b": 2, "c": 3}


def test_every_task_of_an_admitted_gang_has_a_placement() -> None:
    d = schedule(snap(nodes(4), [job("g", 4, instances=5)]))
    placed = admitted(d)["g"]
    assert sorted(placed) == [f"main-{i}" for i in range(5)]
