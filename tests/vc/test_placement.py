"""Best fit: pack onto the fullest nodes that fit, keep whole nodes free for big gangs."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pai.vc import Snapshot, schedule
from tests.vc.vc_builders import admitted, job, node, running, snap


@dataclass
class Case:
    name: str
    snapshot: Snapshot
    placements: dict[str, dict[str, str]]


CASES = [
    Case("a 1-GPU job goes to the fullest node that fits",
         snap([node("empty"), node("half"), node("almost")], [job("a", 1)],
              [running("r1", "half", 4), running("r2", "almost", 7)]),
         {"a": {"main-0": "almost"}}),
    Case("a gang fills partly used nodes before whole ones",
         snap([node("whole"), node("p1"), node("p2")], [job("g", 4, instances=2)],
              [running("r1", "p1", 4), running("r2", "p2", 4)]),
         {"g": {"main-0": "p1", "main-1": "p2"}}),
    Case("small tasks of a gang share a node rather than spread",
         snap([node("a"), node("b")], [job("g", 2, instances=4)]),
         {"g": {"main-0": "a", "main-1": "a", "main-2": "a", "main-3": "a"}}),
    Case("a CPU-only job goes to a node with no free GPU",
         snap([node("free"), node("full")], [job("cpu", 0, cpu=4)], [running("r", "full", 8, cpu=8)]),
         {"cpu": {"main-0": "full"}}),
    Case("later jobs in a pass pack around earlier ones",
         snap([node("a"), node("b")], [job("j1", 5, at=0), job("j2", 3, at=1), job("j3", 8, at=2)]),
         {"j1": {"main-0": "a"}, "j2": {"main-0": "a"}, "j3": {"main-0": "b"}}),
    Case("a node's other tasks are not moved: a 4-GPU job avoids the node with 3 free",
         snap([node("a"), node("b")], [job("j", 4)], [running("r", "a", 5), running("s", "b", 2)]),
         {"j": {"main-0": "b"}}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_best_fit(case: Case) -> None:
    d = schedule(case.snapshot)
    got = admitted(d)
    assert got == case.placements


def test_mixed_roles_are_all_placed() -> None:
    roles = (*job("x", 4, instances=1).tasks, *[t.__class__("ps", 0, t.resources, None, 2) for t in job("y", 0).tasks])
    d = schedule(snap([node("n")], [job("g", roles=roles)]))
    assert admitted(d) == {"g": {"main-0": "n", "ps-0": "n"}}


@pytest.mark.parametrize("whole", [False, True])
def test_multi_node_gpu_jobs_take_whole_nodes_when_configured(whole: bool) -> None:
    s = snap([node("a"), node("b"), node("c")], [job("g", 2, instances=2, at=0), job("small", 1, at=1)],
             [running("r", "a", 1)], whole_nodes_for_multi_node_gpu=whole)
    got = admitted(schedule(s))
    if whole:
        assert got == {"g": {"main-0": "b", "main-1": "c"}, "small": {"main-0": "a"}}
    else:
        assert got == {"g": {"main-0": "a", "main-1": "a"}, "small": {"main-0": "a"}}


def test_nodes_of_running_multi_node_jobs_stay_whole_when_configured() -> None:
    gang = running("g", ["a", "b"], 2)
    s = snap([node("a"), node("b"), node("c", 1)], [job("small", 1)], [gang], whole_nodes_for_multi_node_gpu=True)
    assert admitted(schedule(s)) == {"small": {"main-0": "c"}}
