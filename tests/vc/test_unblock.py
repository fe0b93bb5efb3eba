"""What would unblock a waiting job (pai.vc.unblock): the smallest change, computed, per reason code."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

import pai.vc.unblock as unblock
from pai.vc import IncrementalScheduler, RunningJob, Snapshot, schedule
from pai.vc.unblock import clock
from tests.vc.vc_builders import job, node, nodes, pinned, running, snap, vc


def ends(r: RunningJob, seconds: float) -> RunningJob:
    """The running job, expected to run ``seconds`` in all (extras.expectedDurationSeconds)."""
    return replace(r, expected_seconds=seconds)


def typically(r: RunningJob, seconds: float) -> RunningJob:
    """The running job, declaring nothing, whose user's jobs in its VC typically run ``seconds``."""
    return replace(r, expected_seconds=seconds, expected_typical=True)


@dataclass
class Case:
    name: str
    snapshot: Snapshot
    job: str
    unblock: dict[str, Any] | None  # figures["unblock"]; None: no hint
    text: str = ""  # the sentence appended to the message


CASES = [
    # ---- NoNodeFits: running jobs whose exit makes it fit -------------------------------------------------------
    Case("one task: the node closest to fitting and the job there",
         snap([node("n0"), node("n1")], [job("a", 4)], [running("r", "n0", 6), running("s", "n1", 5)]),
         "a", {"kind": "nodeGpus", "node": "n1", "have": 3, "need": 4, "jobs": ["s"], "eta": None},
         "1 more GPU on n1 would do: it would start once s exits"),
    Case("of equally few exits, the one that ends soonest",
         snap([node("n0"), node("n1")], [job("a", 4)], [ends(running("r", "n0", 6), 3500), running("s", "n1", 5)]),
         "a", {"kind": "nodeGpus", "node": "n0", "have": 2, "need": 4, "jobs": ["r"], "eta": 3500.0,
               "etaFrom": "declared"},
         "2 more GPUs on n0 would do: it would start once r exits (about 00:58 UTC)"),
    Case("fewer exits beat sooner ones",
         snap([node("n0"), node("n1")], [job("a", 8)],
              [ends(running("x", "n0", 4), 200), ends(running("y", "n0", 4), 200), ends(running("z", "n1", 8), 5000)]),
         "a", {"kind": "nodeGpus", "node": "n1", "have": 0, "need": 8, "jobs": ["z"], "eta": 5000.0,
               "etaFrom": "declared"},
         "8 more GPUs on n1 would do: it would start once z exits (about 01:23 UTC)"),
    Case("on one node, the biggest jobs first: fewer exits",
         snap([node("n0")], [job("a", 7)], [ends(running("x", "n0", 1), 200), ends(running("y", "n0", 1), 200),
                                            ends(running("z", "n0", 6), 900)]),
         "a", {"kind": "nodeGpus", "node": "n0", "have": 0, "need": 7, "jobs": ["x", "z"], "eta": 900.0,
               "etaFrom": "declared"},
         "7 more GPUs on n0 would do: it would start once x and z exit (about 00:15 UTC)"),
    Case("a gang: exits on several nodes, soonest first, the time of the last",
         snap(nodes(3), [job("g", 8, instances=3)],
              [ends(running("a", "node-1", 2), 600), ends(running("b", "node-2", 1), 300),
               ends(running("c", "node-2", 1), 400)]),
         "g", {"kind": "jobsExit", "jobs": ["b", "c", "a"], "eta": 600.0, "etaFrom": "declared"},
         "would start once b, c and a exit (about 00:10 UTC)"),
    Case("no time when one end is unknown",
         snap(nodes(2), [job("g", 8, instances=2)], [ends(running("a", "node-0", 2), 600), running("b", "node-1", 1)]),
         "g", {"kind": "jobsExit", "jobs": ["a", "b"], "eta": None}, "would start once a and b exit"),
    Case("a job on two nodes frees both",
         snap(nodes(2), [job("g", 8, instances=2)], [running("m", ["node-0", "node-1"], 1)]),
         "g", {"kind": "jobsExit", "jobs": ["m"], "eta": None}, "would start once m exits"),
    Case("more jobs than are named",
         snap([node("n0")], [job("a", 8)], [running(f"r{i}", "n0", 2) for i in range(4)]),
         "a", {"kind": "nodeGpus", "node": "n0", "have": 0, "need": 8, "jobs": ["r0", "r1", "r2", "r3"], "eta": None},
         "8 more GPUs on n0 would do: it would start once r0, r1, r2 and 1 more exit"),
    Case("whole nodes: every job on the node",
         snap(nodes(2), [job("g", 4, instances=2)], [running("x", "node-0", 1), running("y", "node-0", 1)],
              whole_nodes_for_multi_node_gpu=True),
         "g", {"kind": "jobsExit", "jobs": ["x", "y"], "eta": None}, "would start once x and y exit"),
    Case("non-preemptible work is named too",
         snap([node("n0")], [job("a", 8, priority=100)], [pinned("np", "n0", 2, started=50)]),
         "a", {"kind": "nodeGpus", "node": "n0", "have": 6, "need": 8, "jobs": ["np"], "eta": None},
         "2 more GPUs on n0 would do: it would start once np exits"),
    Case("a job the same pass admitted is named, with its expected end",
         snap([node("n0")], [job("big", 8), replace(job("small", 4, at=1), expected_seconds=60)],
              [running("r", "n0", 2)]),
         "big", {"kind": "nodeGpus", "node": "n0", "have": 2, "need": 8, "jobs": ["small", "r"], "eta": None},
         "6 more GPUs on n0 would do: it would start once small and r exit"),
    Case("a typical run time gives a time too, said as such",
         snap([node("n0")], [job("a", 4)], [typically(running("r", "n0", 6), 3500)]),
         "a", {"kind": "nodeGpus", "node": "n0", "have": 2, "need": 4, "jobs": ["r"], "eta": 3500.0,
               "etaFrom": "typical"},
         "2 more GPUs on n0 would do: it would start once r exits (about 00:58 UTC, by typical run times)"),
    Case("declared and typical ends together: the time is typical",
         snap(nodes(2), [job("g", 8, instances=2)],
              [ends(running("a", "node-0", 2), 600), typically(running("b", "node-1", 1), 300)]),
         "g", {"kind": "jobsExit", "jobs": ["b", "a"], "eta": 600.0, "etaFrom": "typical"},
         "would start once b and a exit (about 00:10 UTC, by typical run times)"),
    Case("a typical job being stopped ends now: its typical run time does not count",
         snap(nodes(2), [job("g", 8, instances=2)],
              [ends(running("a", "node-0", 2), 600), typically(running("b", "node-1", 1, preempting=True), 9000)]),
         "g", {"kind": "jobsExit", "jobs": ["b", "a"], "eta": 600.0, "etaFrom": "declared"},
         "would start once b and a exit (about 00:10 UTC)"),
    Case("an end more than a day away has its date",
         snap([node("n0")], [job("a", 8)], [ends(running("r", "n0", 1, started=0), 200_000)]),
         "a", {"kind": "nodeGpus", "node": "n0", "have": 7, "need": 8, "jobs": ["r"], "eta": 200_000.0,
               "etaFrom": "declared"},
         "1 more GPU on n0 would do: it would start once r exits (about 1970-01-03 07:33 UTC)"),
    # ---- VcAtMax: the max, or the VC's own jobs ---------------------------------------------------------------
    Case("VC at max: the max that would do, or its job that would",
         snap(nodes(2), [job("a", 4, vc="dev")], [running("r", "node-0", 6, vc="dev"), running("o", "node-1", 4)],
              [vc("dev", 0, max=8)]),
         "a", {"kind": "vcLimit", "vc": "dev", "changes": [{"field": "max.gpu", "now": 8, "needed": 10}],
               "jobs": ["r"], "eta": None},
         "would fit if VC `dev`'s max GPU were 10 instead of 8, or once r exits"),
    Case("VC at max on two resources",
         snap(nodes(2), [job("a", 4, cpu=8, vc="dev")], [running("r", "node-0", 6, cpu=12, vc="dev")],
              [vc("dev", 0, max=(8, 16, 10**9))]),
         "a", {"kind": "vcLimit", "vc": "dev",
               "changes": [{"field": "max.gpu", "now": 8, "needed": 10}, {"field": "max.cpu", "now": 16, "needed": 20}],
               "jobs": ["r"], "eta": None},
         "would fit if VC `dev`'s max GPU were 10 instead of 8 and CPU were 20 instead of 16, or once r exits"),
    Case("VC at max: the soonest of its jobs that would do",
         snap(nodes(2), [job("a", 4, vc="dev")],
              [ends(running("late", "node-0", 4, vc="dev"), 900), ends(running("soon", "node-1", 4, vc="dev"), 300)],
              [vc("dev", 0, max=8)]),
         "a", {"kind": "vcLimit", "vc": "dev", "changes": [{"field": "max.gpu", "now": 8, "needed": 12}],
               "jobs": ["soon"], "eta": 300.0, "etaFrom": "declared"},
         "would fit if VC `dev`'s max GPU were 12 instead of 8, or once soon exits (about 00:05 UTC)"),
    # ---- UserLimit: the limit, or the user's own jobs -----------------------------------------------------------
    Case("user limit: the limit that would do, or the user's own job",
         snap(nodes(2), [job("a", 4, user="ann")], [running("r", "node-0", 6, user="ann"), running("s", "node-1", 6)],
              [vc("default", user_gpu=8)]),
         "a", {"kind": "userLimit", "vc": "default", "user": "ann", "field": "userLimits.gpu", "now": 8,
               "needed": 10, "jobs": ["r"], "eta": None},
         "would fit if user ann's GPU limit in VC `default` were 10 instead of 8, or once r exits"),
    Case("user limit set for the user by name",
         snap(nodes(2), [job("a", 4, user="ann")], [running("r", "node-0", 2, user="ann")],
              [replace(vc("default", user_gpu=8), user_gpu_limits={"ann": 4})]),
         "a", {"kind": "userLimit", "vc": "default", "user": "ann", "field": "userLimits.users.ann", "now": 4,
               "needed": 6, "jobs": ["r"], "eta": None},
         "would fit if user ann's GPU limit in VC `default` were 6 instead of 4, or once r exits"),
    # ---- LendingLimit: how much more the keepers would have to lend ---------------------------------------------
    Case("lending limit of the VC that keeps its idle guarantee",
         snap(nodes(1), [job("a", 4, vc="a")], vcs=[vc("b", 8, lending=0), vc("a", 0)]),
         "a", {"kind": "lendingLimit", "changes": [{"vc": "b", "field": "lendingLimit.gpu", "now": 0, "needed": 4}]},
         "would fit if VC `b`'s lendingLimit GPU were 4 instead of 0"),
    Case("lending limits of two VCs, the one keeping more first",
         snap(nodes(2), [job("a", 7, instances=2, vc="a")],
              vcs=[vc("b", 8, lending=4), vc("c", 8, lending=4), vc("a", 0)]),
         "a", {"kind": "lendingLimit", "changes": [{"vc": "b", "field": "lendingLimit.gpu", "now": 4, "needed": 8},
                                                   {"vc": "c", "field": "lendingLimit.gpu", "now": 4, "needed": 6}]},
         "would fit if VC `b`'s lendingLimit GPU were 8 instead of 4 and VC `c`'s lendingLimit GPU were 6 "
         "instead of 4"),
    # ---- no hint ------------------------------------------------------------------------------------------------
    Case("never fits: the job must change, as the reason says",
         snap(nodes(1), [job("a", 16)]), "a", None),
    Case("unknown VC: no hint", snap(nodes(1), [job("a", 1, vc="ghost")]), "a", None),
    Case("waiting for its victims: no change needed",
         snap(nodes(1), [job("p", 8, priority=100)], [running("low", "node-0", 8)]), "p", None),
    Case("a non-gang job: its reason is one task's, no hint",
         snap([node("n0")], [replace(job("a", 8), gang=False)], [running("r", "n0", 2)]), "a", None),
    Case("hints off", snap([node("n0")], [job("a", 8)], [running("r", "n0", 2)], unblock_hints_per_vc=0), "a", None),
    Case("only the first jobs of a VC get one",
         snap([node("n0")], [job("a", 8), job("b", 8, at=1)], [running("r", "n0", 2)], unblock_hints_per_vc=1),
         "b", None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_unblock(case: Case) -> None:
    reason = schedule(case.snapshot).waiting[case.job]
    assert reason.figures.get("unblock") == case.unblock
    if case.unblock is None:
        assert "would" not in reason.message
    else:
        assert reason.message.endswith(f"; {case.text}")
        assert reason.message.count("; would") + reason.message.count("would do:") == 1


def test_jobs_of_one_shape_share_one_search(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unblock, "MAX_SEARCHES", 1)
    s = snap([node("n0")], [job("a", 8), job("b", 8, at=1), job("c", 7, at=2)], [running("r", "n0", 2)])
    got = {k: r.figures.get("unblock", {}).get("jobs") for k, r in schedule(s).waiting.items()}
    assert got == {"a": ["r"], "b": ["r"], "c": None}  # c's shape would be a second search


def test_the_pass_leaves_the_nodes_as_they_were() -> None:
    s = snap(nodes(3), [job("g", 8, instances=3), job("w", 4, instances=2, at=1)],
             [running("a", "node-1", 2), running("m", ["node-0", "node-2"], 1)], whole_nodes_for_multi_node_gpu=True)
    pools = []
    for per_vc in (0, 10):
        inc = IncrementalScheduler(replace(s, config=replace(s.config, unblock_hints_per_vc=per_vc)))
        d = inc.schedule(s.now)
        assert ("unblock" in d.waiting["g"].figures) is (per_vc > 0)
        inc.state.pool.in_order()
        p = inc.state.pool
        pools.append((p.free_gpu, p.free_cpu, p.free_mem, p.free_ports, p.tasks_on, p.open,
                      [list(p.candidates(0, None))]))
    assert pools[0] == pools[1]


def test_an_incremental_pass_keeps_the_hint_once() -> None:
    s = snap([node("n0")], [job("a", 8)], [ends(running("r", "n0", 2), 600)])
    inc = IncrementalScheduler(s)
    first = inc.schedule(s.now).waiting["a"]
    again = inc.schedule(s.now + 1).waiting["a"]
    assert again == first
    assert again.message.count("would start") == 1


@pytest.mark.parametrize(("at", "now", "text"), [(3600, 100, "01:00 UTC"), (86_400 + 60, 0, "1970-01-02 00:01 UTC")],
                         ids=["within a day: the time", "later: the date too"])
def test_clock(at: float, now: float, text: str) -> None:
    assert clock(at, now) == text
