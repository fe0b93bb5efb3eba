"""Combined preemption: a job that would take its VC past its guarantee stops its VC's own lower-priority work until
it would not, and then reclaims from VCs that borrow, in one decision; the cheaper of that plan and the one without
reclaim wins."""

from __future__ import annotations

import pytest

from pai.vc import schedule
from pai.vc.policy import Reclaim, WithinVc
from tests.vc.test_preemption import Case, check
from tests.vc.vc_builders import job, node, pinned, running, snap, vc

NODES = [node("n0"), node("n1"), node("n2")]
A8_B8 = [vc("a", 8), vc("b", 8)]  # `default` holds the third node's worth, idle
# a at its guarantee with one 2-task gang of low priority; b borrows 8 beyond its guarantee
AT_GUARANTEE = [running("a-low", ["n0", "n1"], 4, vc="a"), running("b-new", "n0", 4, vc="b", started=5),
                running("b-old", "n1", 4, vc="b", started=1), running("b-own", "n2", 8, vc="b")]
BIG = job("a-big", 8, vc="a", priority=100)


CASES = [
    Case("a VC at its guarantee evicts its own lower-priority job and another VC's borrowed job in one decision",
         snap(NODES, [BIG], AT_GUARANTEE, A8_B8),
         {"a-low": "a-big", "b-new": "a-big"}, {"a-big": {"main-0": "n0"}}, {"a-big": "WaitingForPreemption"}),
    Case("a VC below its guarantee that the job would take past it",
         snap(NODES, [BIG], [running("a-low", "n0", 4, vc="a"), running("b-new", "n0", 4, vc="b", started=5),
                             running("b-own", ["n1", "n2"], 8, vc="b")], A8_B8),
         {"a-low": "a-big", "b-new": "a-big"}, {"a-big": {"main-0": "n0"}}),
    Case("without within-VC preemption the job waits",
         snap(NODES, [BIG], AT_GUARANTEE, [vc("a", 8, within=WithinVc.NEVER), vc("b", 8)]),
         {}, waiting={"a-big": "NoNodeFits"}),
    Case("without reclaim the job waits",
         snap(NODES, [BIG], AT_GUARANTEE, [vc("a", 8, reclaim=Reclaim.NEVER), vc("b", 8)]),
         {}, waiting={"a-big": "NoNodeFits"}),
    Case("reclaim LowerPriority spares borrowed work of equal priority",
         snap(NODES, [job("a-big", 8, vc="a", priority=10)], [*AT_GUARANTEE[1:], running("a-low", ["n0", "n1"], 4,
                                                                                       vc="a", priority=1)],
              [vc("a", 8, reclaim=Reclaim.LOWER_PRIORITY), vc("b", 8)]),
         {}, waiting={"a-big": "NoNodeFits"}),
    Case("a job larger than its VC's guarantee never reclaims",
         snap(NODES, [job("a-big", 8, vc="a", priority=100)], AT_GUARANTEE, [vc("a", 4), vc("b", 8)]),
         {}, waiting={"a-big": "NoNodeFits"}),
    Case("a VC that does not borrow is no source",
         snap(NODES, [BIG], AT_GUARANTEE, [vc("a", 8), vc("b", 16)]),
         {}, waiting={"a-big": "NoNodeFits"}),
    Case("own work of higher priority is not stopped to make guarantee room",
         snap(NODES, [BIG], [*AT_GUARANTEE[1:], running("a-low", ["n0", "n1"], 4, vc="a", priority=100)], A8_B8),
         {}, waiting={"a-big": "NoNodeFits"}),
    Case("non-preemptible borrowed work is passed by, and the job says so",
         snap(NODES, [BIG], [*AT_GUARANTEE[:1], pinned("b-new", "n0", 4, vc="b", started=5),
                             pinned("b-old", "n1", 4, vc="b", started=1), pinned("b-own", "n2", 8, vc="b")],
              A8_B8),
         {}, waiting={"a-big": "HeldByNonPreemptible"}),
    Case("the cheaper plan wins: two low-priority own jobs and a borrowed one rather than a higher-priority own job",
         snap(NODES, [job("a-big", 8, vc="a", priority=100)],
              [running("a-low", "n0", 4, vc="a", priority=1), running("a-low2", "n2", 4, vc="a", priority=1),
               running("a-mid", "n1", 8, vc="a", priority=50), running("b-new", "n0", 4, vc="b"),
               pinned("d", "n2", 4)], [vc("a", 16), vc("b", 0)]),
         {"a-low": "a-big", "a-low2": "a-big", "b-new": "a-big"}, {"a-big": {"main-0": "n0"}}),
    Case("the plan without reclaim wins when it is cheaper",
         snap(NODES, [job("a-big", 8, vc="a", priority=100)],
              [running("a-low", "n0", 4, vc="a", priority=1), running("a-low2", "n2", 4, vc="a", priority=1),
               running("a-mid", "n1", 8, vc="a", priority=1), running("b-new", "n0", 4, vc="b"),
               pinned("d", "n2", 4)], [vc("a", 16), vc("b", 0)]),
         {"a-mid": "a-big"}, {"a-big": {"main-0": "n1"}}),
    Case("an own victim taken for the guarantee is given back when one the node needs covers it",
         snap([*NODES, node("n3")], [BIG],
              [running("a-lower", "n3", 4, vc="a", priority=1), pinned("d", "n3", 4),
               running("a-low", "n0", 4, vc="a", priority=5), running("b-new", "n0", 4, vc="b"),
               pinned("b-old", "n1", 8, vc="b"), pinned("b-own", "n2", 8, vc="b")], [vc("a", 12), vc("b", 8)]),
         {"a-low": "a-big", "b-new": "a-big"}, {"a-big": {"main-0": "n0"}}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_combined_preemption(case: Case) -> None:
    check(case)  # and nothing is admitted: each preemptor waits for its victims


def test_each_victim_names_its_rule() -> None:
    d = schedule(snap(NODES, [BIG], AT_GUARANTEE, A8_B8))
    assert {p.victim: p.rule for p in d.preemptions} == {"a-low": "within-vc", "b-new": "reclaim"}
    assert {p.victim: p.message for p in d.preemptions} == {
        "a-low": "a-big (priority 100) preempts a-low (priority 10) in VC `a`",
        "b-new": "VC `a` reclaims its guarantee from VC `b`, which is above its own, for a-big (priority 100)",
    }
    assert d.waiting["a-big"].message == "will start when 2 preempted jobs exit"
