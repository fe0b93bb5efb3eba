"""Node selectors: a task goes only to a node carrying every label of its selector, with the value asked for."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pai.vc import Snapshot, schedule
from tests.vc.vc_builders import admitted, job, node, running, snap, tasks

A = {"zone": "a"}
B = {"zone": "b"}
ZONES = [node("a0", labels={"zone": "a", "ssd": "yes"}), node("b0", labels={"zone": "b"}), node("plain")]


@dataclass
class Case:
    name: str
    snapshot: Snapshot
    placed: dict[str, dict[str, str]]  # job -> task -> node
    waiting: dict[str, tuple[str, str]] = field(default_factory=dict)  # job -> (code, text in the message)


CASES = [
    Case("a selector picks the labelled node over the fuller one best fit would pick",
         snap(ZONES, [job("j", 1, selector=B)], [running("r", "a0", 4)]),
         {"j": {"main-0": "b0"}}),
    Case("every label must match",
         snap(ZONES, [job("j", 1, selector={"zone": "a", "ssd": "yes"})]),
         {"j": {"main-0": "a0"}}),
    Case("a label with another value does not match",
         snap(ZONES, [job("j", 1, selector={"zone": "a", "ssd": "no"})]),
         {}, {"j": ("NeverFits", "the cluster has no node with labels ssd=no,zone=a")}),
    Case("each role goes where its own selector says (a role's selector overrides the job's)",
         snap(ZONES, [job("j", roles=(*tasks(1, role="ps", selector=A), *tasks(1, 2, role="worker", selector=B)))]),
         {"j": {"ps-0": "a0", "worker-0": "b0", "worker-1": "b0"}}),
    Case("no node of the cluster has the labels: NeverFits naming them",
         snap(ZONES, [job("j", 1, selector={"zone": "c"})]),
         {}, {"j": ("NeverFits", "the cluster has no node with labels zone=c")}),
    Case("an empty cluster: NeverFits naming the labels",
         snap([], [job("j", 1, selector=A)]),
         {}, {"j": ("NeverFits", "the cluster has no node with labels zone=a")}),
    Case("the matching nodes are full while others are free: NoNodeFits naming the labels",
         snap(ZONES, [job("j", 4, selector=A)], [running("r", "a0", 6)]),
         {}, {"j": ("NoNodeFits", "no node has 4 free GPUs with labels zone=a (largest free: 2 on a0)")}),
    Case("the matching node is cordoned",
         snap([node("a0", labels=A, schedulable=False), node("plain")], [job("j", 1, selector=A)]),
         {}, {"j": ("NoNodeFits", "no schedulable node with labels zone=a")}),
    Case("GPU type and selector: both must match",
         snap([node("t4", gpu_type="T4", labels=A), node("v100", gpu_type="V100", labels=B),
               node("v100a", gpu_type="V100", labels=A)], [job("j", 1, gpu_type="V100", selector=A)]),
         {"j": {"main-0": "v100a"}}),
    Case("GPU type and selector that no one node has together",
         snap([node("t4", gpu_type="T4", labels=A), node("v100", gpu_type="V100", labels=B)],
              [job("j", 1, gpu_type="V100", selector=A)]),
         {}, {"j": ("NeverFits", "the cluster has no node of type V100 with labels zone=a")}),
    Case("jobs of one shape with different selectors do not share a failed placement",
         snap(ZONES, [job("ja", 8, selector=A, at=1), job("jb", 8, selector=B, at=2)], [running("r", "a0", 1)]),
         {"jb": {"main-0": "b0"}}, {"ja": ("NoNodeFits", "with labels zone=a")}),
    Case("a gang spreads over the matching nodes only",
         snap([node("a0", labels=A), node("a1", labels=A), node("plain")], [job("g", 8, instances=2, selector=A)]),
         {"g": {"main-0": "a0", "main-1": "a1"}}),
    Case("a gang larger than the matching nodes never fits",
         snap([node("a0", labels=A), node("plain"), node("plain2")], [job("g", 8, instances=2, selector=A)]),
         {}, {"g": ("NeverFits", "needs 2 nodes labelled zone=a with 8 GPU, 1 CPU, 1024 MB; the cluster has 1")}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_selectors(case: Case) -> None:
    d = schedule(case.snapshot)
    assert admitted(d) == case.placed
    assert {k: r.code for k, r in d.waiting.items()} == {k: code for k, (code, _) in case.waiting.items()}
    for key, (_, text) in case.waiting.items():
        assert text in d.waiting[key].message


def test_a_reason_carries_the_selector_in_its_figures() -> None:
    d = schedule(snap(ZONES, [job("j", 1, selector={"zone": "c"})]))
    assert d.waiting["j"].figures["nodeSelector"] == {"zone": "c"}
