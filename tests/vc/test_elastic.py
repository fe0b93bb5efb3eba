"""Elastic jobs (issue 31): admitted at their minimum, grown into idle capacity, shrunk before whole jobs are
preempted (pai.vc.elastic, pai.vc.elastic_shrink; docs/scheduling.md#elastic-jobs)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from pai.vc import IncrementalScheduler, Snapshot, schedule
from pai.vc.policy import FairSharing
from pai.vc.snapshot import ResizeCause
from tests.vc.vc_builders import admitted, codes, job, node, nodes, pinned, resizes, running, snap, vc, victims


@dataclass
class Case:
    name: str
    snapshot: Snapshot
    resizes: dict[str, tuple[int, int]]  # job -> (size from, size to)
    admitted: dict[str, int] = field(default_factory=dict)  # job -> tasks admitted
    waiting: dict[str, str] = field(default_factory=dict)  # job -> code
    victims: dict[str, str] = field(default_factory=dict)  # whole jobs preempted -> preemptor


def elastic(key: str, count: int, lo: int, hi: int, on: str = "n0", **kw: object) -> object:
    """A running elastic job of ``count`` 1-GPU tasks on node ``on``, stretching from ``lo`` to ``hi``."""
    return running(key, [on] * count, 1, elastic=(lo, hi), **kw)  # type: ignore[arg-type]


N0 = [node("n0")]
DEV2 = [vc("dev", 2), vc("default")]

GROWTH = [
    Case("grows into idle capacity, one task per free GPU", snap(N0, [], [elastic("e", 2, 1, 8)]), {"e": (2, 8)}),
    Case("stops at its maximum", snap(N0, [], [elastic("e", 2, 1, 4)]), {"e": (2, 4)}),
    Case("at its maximum: nothing to do", snap(N0, [], [elastic("e", 4, 1, 4)]), {}),
    Case("within its VC's max", snap(N0, [], [elastic("e", 2, 1, 8, vc="dev")], [vc("dev", 0, max=3)]),
         {"e": (2, 3)}),
    Case("within its user's GPU limit", snap(N0, [], [elastic("e", 2, 1, 8, vc="dev")], [vc("dev", 8, user_gpu=5)]),
         {"e": (2, 5)}),
    Case("borrows beyond its VC's guarantee", snap(N0, [], [elastic("e", 2, 1, 8, vc="dev")], DEV2), {"e": (2, 8)}),
    Case("not into guarantee another VC does not lend",
         snap(N0, [], [elastic("e", 2, 1, 8, vc="dev")], [vc("dev", 2), vc("prod", 4, lending=0), vc("default")]),
         {"e": (2, 4)}),
    Case("within the guarantee first: the job that stays within it gets the last idle GPUs",
         snap(N0, [], [elastic("mine", 2, 1, 8, vc="a", priority=10), elastic("loud", 2, 1, 8, vc="b", priority=100),
                       running("r", ["n0", "n0"], 1)], [vc("a", 4), vc("b", 0), vc("default")]),
         {"mine": (2, 4)}),
    Case("then by priority", snap(N0, [], [elastic("lo", 2, 1, 8, priority=1, started=1),
                                           elastic("hi", 2, 1, 8, priority=50, started=2)]), {"hi": (2, 6)}),
    Case("hysteresis: no growth within resizeIntervalSeconds of its last resize",
         snap(N0, [], [elastic("e", 2, 1, 8, resized=50)], resize_interval_seconds=60), {}),
    Case("hysteresis: grows once the interval has passed",
         snap(N0, [], [elastic("e", 2, 1, 8, resized=40)], resize_interval_seconds=60), {"e": (2, 8)}),
    Case("a job being stopped does not grow", snap(N0, [], [elastic("e", 2, 1, 8, preempting=True)]), {}),
    Case("a gang holding whole nodes grows onto idle nodes only",
         snap([*nodes(3, prefix="n"), node("n3", used=(1, 1, 1))], [],
              [running("g", ["n0", "n1"], 8, elastic=(1, 4))], whole_nodes_for_multi_node_gpu=True),
         {"g": (2, 3)}),
    Case("non-preemptible jobs grow too", snap(N0, [], [pinned("e", ["n0"], 1, elastic=(1, 3))]), {"e": (1, 3)}),
    Case("waiting jobs first: a job of equal priority waiting for capacity stops growth",
         snap(N0, [job("p", 4, priority=10)], [elastic("e", 2, 1, 8, priority=10), running("r", "n0", 3)]),
         {}, waiting={"p": "NoNodeFits"}),
    Case("a waiting job of lower priority does not",
         snap(N0, [job("p", 4, priority=1)], [elastic("e", 2, 1, 8, priority=10), running("r", "n0", 3)]),
         {"e": (2, 5)}, waiting={"p": "NoNodeFits"}),
    Case("a job of its VC waiting at the VC's max stops growth",
         snap(nodes(2, prefix="n"), [job("p", 4, vc="dev", priority=1)], [elastic("e", 2, 1, 8, vc="dev")],
              [vc("dev", 0, max=4)]),
         {}, waiting={"p": "VcAtMax"}),
    Case("what the pass admits comes first; growth takes the rest",
         snap(N0, [job("p", 4)], [elastic("e", 2, 1, 8)]), {"e": (2, 4)}, admitted={"p": 1}),
]

ADMISSION = [
    Case("admitted at the size it asks when that fits", snap(N0, [job("p", 1, instances=6, elastic=(2, 8))]),
         {}, admitted={"p": 6}),
    Case("admitted at its minimum when the asked size does not fit",
         snap(N0, [job("p", 1, instances=6, elastic=(2, 8))], [running("r", "n0", 5)]), {}, admitted={"p": 2}),
    Case("waits when even its minimum does not fit",
         snap(N0, [job("p", 1, instances=6, elastic=(2, 8))], [running("r", "n0", 7)]), {},
         waiting={"p": "NoNodeFits"}),
    Case("at its minimum within its VC's max", snap(N0, [job("p", 1, instances=6, vc="dev", elastic=(2, 8))],
                                                    vcs=[vc("dev", 0, max=3)]), {}, admitted={"p": 2}),
    Case("preempts only for its minimum",
         snap(N0, [job("p", 1, instances=6, priority=100, elastic=(2, 8))],
              [running("r", "n0", 6, priority=1), running("s", "n0", 2, priority=1, started=5)]),
         {}, waiting={"p": "WaitingForPreemption"}, victims={"s": "p"}),
]

A4_B4 = [vc("a", 4), vc("b", 4)]

SHRINK = [
    Case("reclaim shrinks an elastic job instead of preempting it",
         snap(N0, [job("a1", 1, instances=4, vc="a")], [elastic("e", 8, 2, 8, vc="b")], A4_B4),
         {"e": (8, 4)}, waiting={"a1": "WaitingForPreemption"}),
    Case("a shrink for reclaim is not held back by hysteresis",
         snap(N0, [job("a1", 2, vc="a")], [elastic("e", 8, 2, 8, vc="b", resized=99)], A4_B4,
              resize_interval_seconds=60),
         {"e": (8, 6)}, waiting={"a1": "WaitingForPreemption"}),
    Case("never below its minimum: then the whole job, as before",
         snap(N0, [job("a1", 1, instances=4, vc="a")], [elastic("e", 8, 6, 8, vc="b")], A4_B4),
         {}, waiting={"a1": "WaitingForPreemption"}, victims={"e": "a1"}),
    Case("its tasks go before a whole job of lower priority",
         snap(N0, [job("p", 2, priority=100)], [running("low", "n0", 4, priority=1), elastic("e", 4, 2, 8)]),
         {"e": (4, 2)}, waiting={"p": "WaitingForPreemption"}),
    Case("priority within a VC shrinks a lower-priority elastic job",
         snap(N0, [job("p", 2, priority=100)], [elastic("e", 8, 2, 8, priority=10)]),
         {"e": (8, 6)}, waiting={"p": "WaitingForPreemption"}),
    Case("equal priority within a VC neither shrinks nor preempts",
         snap(N0, [job("p", 2, priority=10)], [elastic("e", 8, 2, 8, priority=10)]), {}, waiting={"p": "NoNodeFits"}),
    Case("non-preemptible elastic jobs never shrink",
         snap(N0, [job("a1", 2, vc="a")], [pinned("e", ["n0"] * 8, 1, vc="b", elastic=(2, 8))], A4_B4),
         {}, waiting={"a1": "HeldByNonPreemptible"}),
    Case("the minimum run time protects its tasks too",
         snap(N0, [job("p", 2, priority=100)], [elastic("e", 8, 2, 8, started=90)], min_run_seconds=60),
         {}, waiting={"p": "NoNodeFits"}),
    Case("fair sharing shrinks a VC that borrows more",
         snap(N0, [job("a1", 2, vc="a")], [elastic("e", 6, 2, 8, vc="b"), running("d", ["n0", "n0"], 1)],
              [vc("a", 0), vc("b", 0)], fair_sharing=FairSharing(True)),
         {"e": (6, 4)}, waiting={"a1": "WaitingForPreemption"}),
    Case("a job shrunk in a pass is not also taken whole in it",
         snap(N0, [job("a1", 2, vc="a", at=1), job("a2", 2, vc="a", at=2)], [elastic("e", 8, 6, 8, vc="b")], A4_B4),
         {"e": (8, 6)}, waiting={"a1": "WaitingForPreemption", "a2": "NoNodeFits"}),
    Case("two shrinks of one job in a pass count down from each other",
         snap(N0, [job("a1", 2, vc="a", at=1), job("a2", 1, vc="a", at=2)], [elastic("e", 8, 2, 8, vc="b")], A4_B4),
         {"e": (6, 5)}, waiting={"a1": "WaitingForPreemption", "a2": "WaitingForPreemption"}),
    Case("two elastic jobs: the lower priority shrinks",
         snap(N0, [job("p", 2, priority=100)], [elastic("hi", 4, 1, 8, priority=50), elastic("lo", 4, 1, 8)]),
         {"lo": (4, 2)}, waiting={"p": "WaitingForPreemption"}),
]


@pytest.mark.parametrize("case", GROWTH + ADMISSION + SHRINK, ids=lambda c: c.name)
def test_elastic(case: Case) -> None:
    d = schedule(case.snapshot)
    assert resizes(d) == case.resizes
    assert {k: len(v) for k, v in admitted(d).items()} == case.admitted
    assert codes(d) == case.waiting
    assert victims(d) == case.victims


def test_growth_places_the_lowest_free_indices_and_says_why() -> None:
    gap = replace(running("e", ["n0", "n0", "n0"], 1, vc="dev", elastic=(1, 5)), last_resized_at=None)
    gap = replace(gap, tasks=tuple((replace(t, index=i), n) for (t, n), i in zip(gap.tasks, (0, 2, 4), strict=True)))
    d = schedule(snap(N0, [], [gap], [vc("dev", 8)]))
    (z,) = d.resizes
    assert (z.role, z.size_from, z.size_to, z.cause) == ("main", 3, 5, ResizeCause.IDLE_CAPACITY)
    assert [(p.index, p.node) for p in z.placements] == [(1, "n0"), (3, "n0")]
    assert z.message == "grew to 5: 2 GPUs idle in VC `dev`"
    assert z.cause.grows and not z.removed


def test_borrowed_growth_says_so() -> None:
    (z,) = schedule(snap(N0, [], [elastic("e", 2, 1, 4, vc="dev")], DEV2)).resizes
    assert z.message == "grew to 4: 2 GPUs idle in the cluster, borrowed beyond VC `dev`'s guarantee"


def test_a_shrink_removes_the_highest_indices_and_names_its_cause() -> None:
    d = schedule(snap(N0, [job("a1", 1, instances=3, vc="a")], [elastic("e", 8, 2, 8, vc="b")], A4_B4))
    (z,) = d.resizes
    assert (z.size_from, z.size_to, z.removed, z.preemptor) == (8, 5, (7, 6, 5), "a1")
    assert (z.cause, z.cause.grows) == (ResizeCause.RECLAIM, False)
    assert z.message == "shrank to 5: VC `a` reclaims 3 GPUs"
    assert not d.preemptions
    assert d.waiting["a1"].message == "will start when 3 tasks of elastic jobs stop"
    assert d.planned["a1"].placements


def test_a_shrunk_job_does_not_grow_in_the_same_pass() -> None:
    s = snap([node("n0"), node("n1", 2)], [job("p", 2, priority=100)], [elastic("e", 8, 2, 8, priority=10),
                                                                         running("r", ["n1", "n1"], 1, priority=100)])
    assert resizes(schedule(s)) == {"e": (8, 6)}


def test_elastic_jobs_leave_rigid_scheduling_as_it_was() -> None:
    """The same cluster with the elastic job declared rigid: every rigid job's decision is the same."""
    pend = [job("a1", 4, vc="a", at=1), job("b1", 2, vc="b", at=2)]
    run = [running("r", "n1", 4, vc="b"), elastic("e", 2, 2, 2, on="n0", vc="a")]
    rigid = [running("r", "n1", 4, vc="b"), running("e", ["n0", "n0"], 1, vc="a")]
    for config in ({}, {"fair_sharing": FairSharing(True)}):
        a = schedule(snap(nodes(2, prefix="n"), pend, run, A4_B4, **config))
        b = schedule(snap(nodes(2, prefix="n"), pend, rigid, A4_B4, **config))
        assert (a.admissions, a.preemptions, a.waiting, a.planned) == (b.admissions, b.preemptions, b.waiting,
                                                                      b.planned)
        assert not a.resizes


def test_an_elastic_job_waiting_at_its_minimum_is_told_about_its_minimum() -> None:
    d = schedule(snap(N0, [job("p", 1, instances=6, elastic=(3, 8))], [running("r", "n0", 6)]))
    reason = d.waiting["p"]
    assert reason.code == "NoNodeFits"
    assert reason.message.startswith("needs 3 nodes with 1 GPU"), reason.message  # its minimum, not the 6 it asks


def test_an_incremental_pass_admits_at_the_minimum_and_keeps_the_job_elastic() -> None:
    s = snap(N0, [job("p", 1, instances=6, elastic=(2, 8))], [running("r", "n0", 5)])
    inc = IncrementalScheduler(s)
    d = inc.schedule(s.now)
    assert {k: len(v) for k, v in admitted(d).items()} == {"p": 2}
    assert not d.resizes
    assert inc.state.index.jobs["p"].elastic == s.pending[0].elastic


def test_two_shrinks_of_one_job_in_a_pass_chain_their_sizes() -> None:
    d = schedule(snap(N0, [job("a1", 2, vc="a", at=1), job("a2", 1, vc="a", at=2)], [elastic("e", 8, 2, 8, vc="b")],
                      A4_B4))
    assert [(z.size_from, z.size_to, z.removed, z.preemptor) for z in d.resizes] == [(8, 6, (7, 6), "a1"),
                                                                                    (6, 5, (5,), "a2")]


def test_a_job_preempted_whole_does_not_grow() -> None:
    s = snap([node("n0"), node("n1", 4)], [job("p", 8, priority=100)], [elastic("e", 4, 4, 8, on="n0", priority=1)])
    d = schedule(s)
    assert victims(d) == {"e": "p"} and not d.resizes


def test_an_incremental_scheduler_grows_on_full_passes_only_and_holds_what_it_grew() -> None:
    s = snap(N0, [], [elastic("e", 2, 1, 4)])
    inc = IncrementalScheduler(s)
    assert not inc.schedule(s.now).resizes
    assert resizes(inc.schedule(s.now + 1, full=True)) == {"e": (2, 4)}
    held = inc.state.index.jobs["e"]
    assert sorted(t.index for t, _ in held.tasks) == [0, 1, 2, 3] and held.last_resized_at == s.now + 1
    inc.submit(job("p", 1, instances=5))
    d = inc.schedule(s.now + 2, full=True)  # 4 of the node's 8 GPUs are the grown job's now
    assert not d.resizes and d.waiting["p"].code == "NoNodeFits"


def test_an_incremental_pass_shrinks_for_a_reclaim() -> None:
    s = snap(N0, [], [elastic("e", 8, 2, 8, vc="b")], A4_B4)
    inc = IncrementalScheduler(s)
    inc.schedule(s.now)
    inc.submit(job("a1", 1, instances=3, vc="a"))
    d = inc.schedule(s.now + 1)
    assert [(z.size_to, z.removed) for z in d.resizes] == [(5, (7, 6, 5))]
    assert not d.preemptions and d.planned["a1"].placements
