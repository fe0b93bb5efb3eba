"""Non-preemptible work: never a victim of any rule, never counted as room a preemption could free; a job that
could start only by preempting it waits (saying so), and smaller jobs use what is idle beside it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pai.vc import IncrementalScheduler, Snapshot, schedule
from tests.vc.vc_builders import admitted, codes, job, node, nodes, pinned, running, snap, vc, victims

HELD = "HeldByNonPreemptible"
A4_B4 = [vc("a", 4), vc("b", 4)]


@dataclass
class Case:
    name: str
    snapshot: Snapshot
    victims: dict[str, str]  # victim -> preemptor
    waiting: dict[str, str]
    admitted: set[str] = field(default_factory=set)
    planned: set[str] = field(default_factory=set)


CASES = [
    Case("within a VC a higher priority job does not preempt non-preemptible work",
         snap([node("n0")], [job("p", 8, priority=100)], [pinned("np", "n0", 8)]),
         {}, {"p": HELD}),
    Case("reclaim passes non-preemptible borrowed work by",
         snap([node("n0")], [job("a1", 4, vc="a")],
              [pinned("b1", "n0", 4, vc="b", started=10), pinned("b2", "n0", 4, vc="b", started=20)], A4_B4),
         {}, {"a1": HELD}),
    Case("reclaim takes a preemptible borrowed job where the usual victim is non-preemptible",
         snap([node("n0")], [job("a1", 4, vc="a")],
              [running("b1", "n0", 4, vc="b", started=10), pinned("b2", "n0", 4, vc="b", started=20)], A4_B4),
         {"b1": "a1"}, {"a1": "WaitingForPreemption"}, planned={"a1"}),
    Case("preempt while borrowing passes non-preemptible oppo work by",
         snap([node("n0")], [job("a1", 4, vc="a", priority=100)],
              [pinned("o", "n0", 4, vc="b", priority=-1), running("b1", "n0", 4, vc="b")],
              [vc("a", 0, while_borrowing=0), vc("b", 8)]),
         {}, {"a1": HELD}),
    Case("a VC at max does not count its non-preemptible work as room",
         snap(nodes(2), [job("p", 4, vc="dev", priority=100)], [pinned("low", "node-0", 4, vc="dev")],
              [vc("dev", 0, max=4)]),
         {}, {"p": HELD}),
    Case("non-preemptible GPUs are not room: the preemptible job beside them is not stopped for nothing",
         snap([node("n0")], [job("p", 8, priority=100)],
              [pinned("np", "n0", 1), running("low", "n0", 7, priority=1)]),
         {}, {"p": HELD}),
    Case("an 8-GPU job waits behind 1 non-preemptible GPU and a lower-priority 4-GPU job starts",
         snap([node("n0")], [job("big", 8, priority=100, at=0), job("small", 4, priority=10, at=1)],
              [pinned("np", "n0", 1)]),
         {}, {"big": HELD}, {"small"}),
    Case("a starving gang holds no node where non-preemptible work runs",
         snap([node("n0")], [job("big", 8, priority=100, at=0), job("small", 4, priority=10, at=1)],
              [pinned("np", "n0", 1)], now=2000, reservation_after_seconds=1800),
         {}, {"big": HELD}, {"small"}),
    Case("a starving gang holds the nodes without non-preemptible work; the small job goes beside it",
         snap([node("n0"), node("n1")], [job("gang", 8, at=0), job("small", 1, at=5)],
              [pinned("np", "n0", 1), running("r1", "n1", 1)], now=2000, reservation_after_seconds=1800),
         {}, {"gang": "NoNodeFits"}, {"small"}),
    Case("a node without non-preemptible work is used instead",
         snap([node("n0"), node("n1")], [job("p", 8, priority=100)],
              [pinned("np", "n0", 1), running("low", "n1", 8, priority=1)]),
         {"low": "p"}, {"p": "WaitingForPreemption"}, planned={"p"}),
    Case("a non-preemptible job being stopped frees its capacity as usual",
         snap([node("n0")], [job("p", 8, priority=100)], [pinned("np", "n0", 8, preempting=True)]),
         {}, {"p": "WaitingForPreemption"}, planned={"p"}),
    Case("a non-preemptible job may itself preempt",
         snap([node("n0")], [job("p", 8, priority=100, preemptible=False)], [running("low", "n0", 8)]),
         {"low": "p"}, {"p": "WaitingForPreemption"}, planned={"p"}),
    Case("at equal priority non-preemptibility is not what blocks: the reason stays NoNodeFits",
         snap([node("n0")], [job("p", 8)], [pinned("np", "n0", 8)]),
         {}, {"p": "NoNodeFits"}),
    Case("the minimum run time, not non-preemptibility, blocks: NoNodeFits",
         snap([node("n0")], [job("p", 8, priority=100)], [pinned("np", "n0", 8, started=90)], min_run_seconds=60),
         {}, {"p": "NoNodeFits"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_non_preemptible(case: Case) -> None:
    d = schedule(case.snapshot)
    assert victims(d) == case.victims
    assert codes(d) == case.waiting
    assert set(admitted(d)) == case.admitted
    assert set(d.planned) == case.planned


def test_the_reason_names_the_work_and_keeps_the_figures() -> None:
    d = schedule(snap([node("n0")], [job("big", 8, priority=100), job("small", 4, at=1)], [pinned("np", "n0", 1)]))
    reason = d.waiting["big"]
    assert reason.message == ("non-preemptible work holds the capacity it needs (np on n0); "
                              "no node has 8 free GPUs (largest free: 7 on n0); "
                              "5 more GPUs on n0 would do: it would start once np and small exit")
    assert reason.figures == {"nonPreemptible": ["np"], "underlyingCode": "NoNodeFits", "role": "main", "needGpu": 8,
                              "largestFreeGpu": 7, "node": "n0",
                              "unblock": {"kind": "nodeGpus", "node": "n0", "have": 3, "need": 8,
                                          "jobs": ["np", "small"], "eta": None}}


def test_a_vc_at_max_says_which_work_it_cannot_stop() -> None:
    d = schedule(snap(nodes(2), [job("p", 4, vc="dev", priority=100)], [pinned("low", "node-0", 4, vc="dev")],
                      [vc("dev", 0, max=4)]))
    assert d.waiting["p"].message == ("non-preemptible work holds the capacity it needs (low on node-0); "
                                      "VC `dev` at max: 4/4 GPU in use, the job needs 4; "
                                      "would fit if VC `dev`'s max GPU were 8 instead of 4, or once low exits")


def test_a_job_an_incremental_pass_starts_stays_non_preemptible() -> None:
    inc = IncrementalScheduler(snap([node("n0")]))
    inc.submit(job("np", 8, preemptible=False))
    assert [a.job for a in inc.schedule(1.0).admissions] == ["np"]
    inc.submit(job("p", 8, priority=100, at=2.0))
    d = inc.schedule(3.0)
    assert (d.preemptions, codes(d)) == ((), {"p": HELD})
    inc.finished("np")
    assert [a.job for a in inc.schedule(4.0).admissions] == ["p"]
