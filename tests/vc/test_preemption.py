"""Preemption: reclaim, preempt-while-borrowing, within a VC, victim order, dampers, jobs already being stopped."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pai.vc import Snapshot, schedule
from pai.vc.policy import Reclaim, WithinVc
from tests.vc.vc_builders import admitted, codes, job, node, nodes, running, snap, vc, victims


@dataclass
class Case:
    name: str
    snapshot: Snapshot
    victims: dict[str, str]  # victim -> preemptor
    planned: dict[str, dict[str, str]] = field(default_factory=dict)
    waiting: dict[str, str] | None = None
    admitted: set[str] = field(default_factory=set)


A4_B4 = [vc("a", 4), vc("b", 4)]
B_BORROWS = [running("b1", "n0", 4, vc="b", started=10), running("b2", "n0", 4, vc="b", started=20)]

CASES = [
    Case("reclaim takes the most recently started borrowed job",
         snap([node("n0")], [job("a1", 4, vc="a")], B_BORROWS, A4_B4),
         {"b2": "a1"}, {"a1": {"main-0": "n0"}}, {"a1": "WaitingForPreemption"}),
    Case("reclaim only for a job that ends within its VC's guarantee",
         snap([node("n0"), node("n1", 0)], [job("a1", 6, vc="a")], B_BORROWS, A4_B4),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("reclaim stops at the source's guarantee",
         snap([node("n0"), node("n1"), node("n2", 4)], [job("a1", 8, vc="a")],
              [running("b1", "n0", 4, vc="b", started=1), running("b2", "n0", 4, vc="b", started=2),
               running("c1", "n1", 8, vc="c", started=3)],
              [vc("a", 8), vc("b", 4), vc("c", 8)]),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("reclaim takes from several VCs, each down to its guarantee, sparing the oldest jobs",
         snap([node("n0"), node("n1")], [job("a1", 8, vc="a")],
              [running("b1", "n0", 4, vc="b", started=1), running("b2", "n1", 4, vc="b", started=2),
               running("c1", "n1", 4, vc="c", started=3), running("c2", "n0", 4, vc="c", started=4)],
              [vc("a", 8), vc("b", 4), vc("c", 4)]),
         {"b2": "a1", "c1": "a1"}, {"a1": {"main-0": "n1"}}),
    Case("reclaim may overshoot by one whole gang",
         snap([node("n0", 4), node("n1", 4)], [job("a1", 4, vc="a")],
              [running("g", ["n0", "n1"], 4, vc="b")], [vc("a", 4), vc("b", 4)]),
         {"g": "a1"}, {"a1": {"main-0": "n0"}}),
    Case("reclaim policy Never",
         snap([node("n0")], [job("a1", 4, vc="a")], B_BORROWS, [vc("a", 4, reclaim=Reclaim.NEVER), vc("b", 4)]),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("reclaim policy LowerPriority spares equal priority",
         snap([node("n0")], [job("a1", 4, vc="a")], B_BORROWS,
              [vc("a", 4, reclaim=Reclaim.LOWER_PRIORITY), vc("b", 4)]),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("reclaim policy LowerPriority takes lower priority",
         snap([node("n0")], [job("a1", 4, vc="a", priority=100)], B_BORROWS,
              [vc("a", 4, reclaim=Reclaim.LOWER_PRIORITY), vc("b", 4)]),
         {"b2": "a1"}, {"a1": {"main-0": "n0"}}),
    Case("oppo jobs count as borrowing even within their VC's guarantee",
         snap([node("n0")], [job("a1", 4, vc="a")],
              [running("o", "n0", 4, vc="b", priority=-1), running("b1", "n0", 4, vc="b")], A4_B4),
         {"o": "a1"}, {"a1": {"main-0": "n0"}}),
    Case("a borrowing job does not reclaim",
         snap([node("n0")], [job("a1", 4, vc="a")], [*B_BORROWS[:1], running("a0", "n0", 4, vc="a", priority=100)],
              [vc("a", 2), vc("b", 2)]),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("preempt while borrowing takes low-priority borrowed work",
         snap([node("n0")], [job("a1", 4, vc="a", priority=100)],
              [running("o", "n0", 4, vc="b", priority=-1), running("b1", "n0", 4, vc="b")],
              [vc("a", 0, while_borrowing=0), vc("b", 8)]),
         {"o": "a1"}, {"a1": {"main-0": "n0"}}),
    Case("preempt while borrowing respects the threshold",
         snap([node("n0")], [job("a1", 4, vc="a", priority=100)], B_BORROWS,
              [vc("a", 0, while_borrowing=0), vc("b", 0)]),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("preempt while borrowing is off by default",
         snap([node("n0")], [job("a1", 4, vc="a", priority=100)],
              [running("o", "n0", 4, vc="b", priority=-1), running("b1", "n0", 4, vc="b")],
              [vc("a", 0), vc("b", 8)]),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("within a VC a higher priority job preempts a lower one",
         snap([node("n0")], [job("p", 8, priority=100)], [running("low", "n0", 8, priority=10)]),
         {"low": "p"}, {"p": {"main-0": "n0"}}),
    Case("within a VC equal priority is not preempted by default",
         snap([node("n0")], [job("p", 8, priority=10, at=50)], [running("r", "n0", 8, priority=10, started=60)]),
         {}, waiting={"p": "NoNodeFits"}),
    Case("LowerOrNewerEqualPriority preempts an equal job started after the preemptor was submitted",
         snap([node("n0")], [job("p", 8, at=50)], [running("r", "n0", 8, started=60)],
              [vc("default", within=WithinVc.LOWER_OR_NEWER_EQUAL_PRIORITY)]),
         {"r": "p"}, {"p": {"main-0": "n0"}}),
    Case("LowerOrNewerEqualPriority spares an equal job started before",
         snap([node("n0")], [job("p", 8, at=50)], [running("r", "n0", 8, started=40)],
              [vc("default", within=WithinVc.LOWER_OR_NEWER_EQUAL_PRIORITY)]),
         {}, waiting={"p": "NoNodeFits"}),
    Case("within VC Never",
         snap([node("n0")], [job("p", 8, priority=100)], [running("low", "n0", 8)],
              [vc("default", within=WithinVc.NEVER)]),
         {}, waiting={"p": "NoNodeFits"}),
    Case("a VC at max makes room by preempting its own lower-priority job",
         snap(nodes(2), [job("p", 4, vc="dev", priority=100)], [running("low", "node-0", 4, vc="dev")],
              [vc("dev", 0, max=4)]),
         {"low": "p"}, {"p": {"main-0": "node-1"}}),
    Case("victims of other VCs go before one's own",
         snap([node("n0")], [job("a1", 4, vc="a", priority=100)],
              [running("own", "n0", 4, vc="a", priority=-1, started=5), running("b1", "n0", 4, vc="b", priority=10)],
              [vc("a", 8), vc("b", 0)]),
         {"b1": "a1"}, {"a1": {"main-0": "n0"}}),
    Case("lower priority first, then most recently started",
         snap([node("n0")], [job("p", 2, priority=100)],
              [running("old-low", "n0", 2, priority=1, started=1), running("new-low", "n0", 2, priority=1, started=9),
               running("newer-mid", "n0", 4, priority=5, started=10)]),
         {"new-low": "p"}, {"p": {"main-0": "n0"}}),
    Case("victims that turn out not to be needed are given back",
         snap([node("n0"), node("n1")], [job("a1", 8, vc="a")],
              [running("v1", "n1", 4, vc="b", started=30), running("v2", "n0", 4, vc="b", started=20),
               running("v3", "n1", 4, vc="b", started=10), running("x", "n0", 4, vc="c")],
              [vc("a", 8), vc("b", 0), vc("c", 4)]),
         {"v1": "a1", "v3": "a1"}, {"a1": {"main-0": "n1"}}),
    Case("no preemption when the job would not fit even after all allowed victims are gone",
         snap([node("n0"), node("n1")], [job("a1", 8, vc="a", instances=2)],
              [running("b1", "n0", 4, vc="b"), running("c1", "n1", 4, vc="c")],
              [vc("a", 16), vc("b", 0), vc("c", 0, max=16)], ),
         {"b1": "a1", "c1": "a1"}, {"a1": {"main-0": "n0", "main-1": "n1"}}),
    Case("no preemption when one node stays blocked by work that may not be preempted",
         snap([node("n0"), node("n1")], [job("a1", 8, vc="a", instances=2)],
              [running("b1", "n0", 4, vc="b"), running("c1", "n1", 4, vc="c")],
              [vc("a", 8), vc("b", 0), vc("c", 4)]),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("a job whose victims are being stopped waits and preempts nothing more",
         snap([node("n0")], [job("p", 8, priority=100)],
              [running("v", "n0", 4, preempting=True, preempted_by="p"), running("w", "n0", 4)]),
         {}, waiting={"p": "WaitingForPreemption"}),
    Case("capacity being freed for nobody goes to the first waiting job",
         snap([node("n0")], [job("p", 4, priority=100)],
              [running("v", "n0", 4, preempting=True), running("w", "n0", 4)]),
         {}, {"p": {"main-0": "n0"}}, {"p": "WaitingForPreemption"}),
    Case("capacity being freed for nobody is used before new victims are taken",
         snap([node("n0"), node("n1"), node("n2")], [job("p", 8, priority=100)],
              [running("l0", "n0", 8, priority=1), running("l1", "n1", 8, priority=1),
               running("v", "n2", 8, preempting=True)]),
         {}, {"p": {"main-0": "n2"}}, {"p": "WaitingForPreemption"}),
    Case("a job that fits now starts even if victims were preempted for it",
         snap([node("n0")], [job("p", 4, priority=100)], [running("v", "n0", 4, preempting=True, preempted_by="p")]),
         {}, admitted={"p"}),
    Case("minimum run time protects young jobs",
         snap([node("n0")], [job("p", 8, priority=100)], [running("young", "n0", 8, started=90)], min_run_seconds=60),
         {}, waiting={"p": "NoNodeFits"}),
    Case("minimum run time lets old jobs go",
         snap([node("n0")], [job("p", 8, priority=100)], [running("old", "n0", 8, started=10)], min_run_seconds=60),
         {"old": "p"}, {"p": {"main-0": "n0"}}),
    Case("the preemption cap defers a second preemptor",
         snap([node("n0"), node("n1")], [job("p", 8, priority=100, at=0), job("q", 8, priority=100, at=1)],
              [running("l0", "n0", 8), running("l1", "n1", 8)], max_preemption_fraction=0.5),
         {"l0": "p"}, {"p": {"main-0": "n0"}}, {"p": "WaitingForPreemption", "q": "PreemptionDeferred"}),
    Case("a gang is preempted whole",
         snap([node("n0"), node("n1")], [job("p", 4, priority=100)], [running("g", ["n0", "n1"], 8)]),
         {"g": "p"}, {"p": {"main-0": "n0"}}),
    Case("a plan holds its capacity: a later job does not take it",
         snap([node("n0")], [job("p", 6, priority=100, at=0), job("s", 3, at=1)],
              [running("low", "n0", 4, priority=1)]),
         {"low": "p"}, {"p": {"main-0": "n0"}}, {"p": "WaitingForPreemption", "s": "NoNodeFits"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_preemption(case: Case) -> None:
    check(case)


def check(case: Case) -> None:
    """The case's decision: its victims, planned placements, waiting codes and admissions (also for
    tests/vc/test_combined_preemption.py)."""
    d = schedule(case.snapshot)
    assert victims(d) == case.victims
    assert {k: {f"{p.role}-{p.index}": p.node for p in a.placements} for k, a in d.planned.items()} == case.planned
    if case.waiting is not None:
        assert codes(d) == case.waiting
    assert set(admitted(d)) == case.admitted
    assert not set(d.planned) & set(admitted(d))


def test_preemptions_name_preemptor_rule_and_message() -> None:
    d = schedule(snap([node("n0")], [job("a1", 4, vc="a")], B_BORROWS, A4_B4))
    (p,) = d.preemptions
    assert (p.victim, p.preemptor, p.rule) == ("b2", "a1", "reclaim")
    assert "VC `a` reclaims its guarantee from VC `b`" in p.message
    reason = d.waiting["a1"]
    assert reason.message == "will start when 1 preempted job exits"
    assert reason.figures == {"victims": 1, "placement": {"main-0": "n0"}}


def test_waiting_for_own_victims_counts_them() -> None:
    s = snap([node("n0")], [job("p", 8, priority=100)],
             [running("v", "n0", 2, preempting=True, preempted_by="p"),
              running("u", "n0", 2, preempting=True, preempted_by="p"), running("w", "n0", 4)])
    assert schedule(s).waiting["p"].message == "will start when 2 preempted jobs exit"


@pytest.mark.parametrize(("rule", "words"), [
    ("within-vc", "p (priority 100) preempts low (priority 10) in VC `default`"),
])
def test_within_vc_message(rule: str, words: str) -> None:
    d = schedule(snap([node("n0")], [job("p", 8, priority=100)], [running("low", "n0", 8)]))
    assert [(x.rule, x.message) for x in d.preemptions] == [(rule, words)]
