"""The per-node lending limit (scheduler.nodeLendingLimit): borrowed work may hold at most the limit of any one node."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pai.domain.errors import InvalidParametersError
from pai.domain.resources import Resources
from pai.vc import RunningJob, Snapshot, schedule
from pai.vc.borrowed import borrowed_jobs
from pai.vc.config import parse_config
from pai.vc.incremental import IncrementalScheduler
from pai.vc.policy import NodeLendingLimit
from pai.vc.round import Round
from pai.vc.simulate import scenario_snapshot
from pai.vc.state import State
from tests.vc.test_config import schema_errors
from tests.vc.test_incremental import _by_fit, _equivalent
from tests.vc.test_properties import snapshots
from tests.vc.vc_builders import admitted, codes, job, node, nodes, running, snap, vc, victims

GPU4 = NodeLendingLimit(gpu=4)
# `a` has no guarantee: all its work borrows; `l` holds the whole cluster of two 8-GPU nodes as its guarantee
A_L = [vc("a", 0), vc("l", 16)]


@dataclass
class Case:
    name: str
    snapshot: Snapshot
    admitted: dict[str, dict[str, str]]
    waiting: dict[str, str] = field(default_factory=dict)
    victims: dict[str, str] = field(default_factory=dict)
    at_limit: list[str] | None = None  # the nodes a per-node LendingLimit reason names


def two(pending: list[Any], running: list[RunningJob], limit: NodeLendingLimit | None = GPU4,
        vcs: list[Any] | None = None) -> Snapshot:
    return snap(nodes(2, prefix="n"), pending, running, vcs if vcs is not None else A_L, node_lending_limit=limit)


CASES = [
    Case("limit off: a borrower packs onto the fullest node as ever",
         two([job("p", 4, vc="a")], [running("r", "n0", 4, vc="a")], limit=None),
         {"p": {"main-0": "n0"}}),
    Case("a borrower goes to another node when the fullest one is at the limit",
         two([job("p", 4, vc="a")], [running("r", "n0", 4, vc="a")]),
         {"p": {"main-0": "n1"}}),
    Case("a borrower waits, naming the nodes, when every node is at the limit",
         two([job("p", 2, vc="a")], [running("r0", "n0", 4, vc="a"), running("r1", "n1", 4, vc="a")]),
         {}, {"p": "LendingLimit"}, at_limit=["n0", "n1"]),
    Case("a task larger than the limit never borrows a node",
         two([job("p", 8, vc="a")], []),
         {}, {"p": "LendingLimit"}, at_limit=["n0", "n1"]),
    Case("a job within its VC's guarantee ignores the limit",
         two([job("p", 4, vc="l")], [running("r", "n0", 4, vc="a")]),
         {"p": {"main-0": "n0"}}),
    Case("the tasks of one borrowing gang count together on a node",
         two([job("p", 3, instances=2, vc="a")], []),
         {"p": {"main-0": "n0", "main-1": "n1"}}),
    Case("without the limit the same gang shares one node",
         two([job("p", 3, instances=2, vc="a")], [], limit=None),
         {"p": {"main-0": "n0", "main-1": "n0"}}),
    Case("jobs admitted borrowing in the pass count for the jobs after them",
         two([job("p1", 4, vc="a", at=1), job("p2", 4, vc="a", at=2), job("p3", 2, vc="a", at=3)], []),
         {"p1": {"main-0": "n0"}, "p2": {"main-0": "n1"}}, {"p3": "LendingLimit"}, at_limit=["n0", "n1"]),
    Case("a limit on GPUs leaves a CPU-only borrowing task alone",
         snap([node("n0")], [job("p", 0, vc="a")], [running("r", "n0", 4, vc="a")], [vc("a", 0), vc("l", 8)],
              node_lending_limit=GPU4),
         {"p": {"main-0": "n0"}}),
    Case("a CPU limit: the task goes where borrowed work holds few CPUs",
         two([job("p", 0, cpu=8, vc="a")], [running("r", "n0", 0, cpu=8, vc="a")],
             limit=NodeLendingLimit(cpu=8)),
         {"p": {"main-0": "n1"}}),
    Case("percent of each node: 50% of a 4-GPU node is 2 GPUs",
         snap([node("n0", 4, 16, 128_000), node("n1", 8)], [job("p", 2, vc="a")],
              [running("r", "n0", 2, vc="a")], [vc("a", 0), vc("l", 12)],
              node_lending_limit=NodeLendingLimit(gpu="50%")),
         {"p": {"main-0": "n1"}}),
    Case("percent of each node: 50% of an 8-GPU node is 4 GPUs",
         snap([node("n0", 8), node("n1", 8)], [job("p", 2, vc="a")],
              [running("r", "n0", 2, vc="a")], A_L, node_lending_limit=NodeLendingLimit(gpu="50%")),
         {"p": {"main-0": "n0"}}),
    Case("over its guarantee, a VC's newest low-priority job is what borrows (its node is at the limit)",
         two([job("p", 4, vc="a")],
             [running("old", "n0", 4, vc="v", priority=100, started=1), running("new", "n1", 4, vc="v", started=2)],
             vcs=[vc("a", 0), vc("v", 4), vc("l", 12)]),
         {"p": {"main-0": "n0"}}),
    Case("over its guarantee, priority ranks before age: the older low-priority job borrows",
         two([job("p", 4, vc="a")],
             [running("old", "n0", 4, vc="v", started=1), running("new", "n1", 4, vc="v", priority=100, started=2)],
             vcs=[vc("a", 0), vc("v", 4), vc("l", 12)]),
         {"p": {"main-0": "n1"}}),
    Case("oppo work always borrows, even within its VC's guarantee",
         two([job("p", 4, vc="a")], [running("o", "n0", 4, vc="l", priority=-1)]),
         {"p": {"main-0": "n1"}}),
    Case("an oppo job is capped even in a VC with guarantee to spare",
         two([job("p", 4, vc="l", priority=-1)], [running("r", "n0", 4, vc="a")]),
         {"p": {"main-0": "n1"}}),
    Case("a job being stopped is leaving, not borrowed",
         two([job("p", 4, vc="a")], [running("r", "n0", 4, vc="a", preempting=True, preempted_by="x")]),
         {"p": {"main-0": "n0"}}),
    Case("preempting for a borrower: the plan respects the limit once its victim's borrowed work is gone",
         snap([node("n0")], [job("p", 4, vc="a")],
              [running("g", "n0", 4, vc="l"), running("o", "n0", 4, vc="b", priority=-1)],
              [vc("a", 0, while_borrowing=-1), vc("b", 0), vc("l", 8)], node_lending_limit=GPU4),
         {}, {"p": "WaitingForPreemption"}, victims={"o": "p"}),
    Case("preempting for a borrower: a plan that would pass the limit is refused",
         snap([node("n0")], [job("p", 4, vc="a")],
              [running("g", "n0", 4, vc="l"), running("o", "n0", 4, vc="b", priority=-1)],
              [vc("a", 0, while_borrowing=-1), vc("b", 0), vc("l", 8)],
              node_lending_limit=NodeLendingLimit(gpu=2)),
         {}, {"p": "LendingLimit"}, at_limit=["n0"]),
    Case("reclaim is not borrowing: the limit does not apply",
         snap([node("n0")], [job("p", 4, vc="l")],
              [running("b1", "n0", 4, vc="a", started=1), running("b2", "n0", 4, vc="a", started=2)],
              [vc("a", 0), vc("l", 4)], node_lending_limit=NodeLendingLimit(gpu=0)),
         {}, {"p": "WaitingForPreemption"}, victims={"b2": "p"}),
    Case("tasks of a non-gang borrower spread past a node at the limit",
         two([replace(job("p", 3, instances=2, vc="a"), gang=False)], []),
         {"p": {"main-0": "n0", "main-1": "n1"}}),
    Case("a non-gang borrower's tasks wait for the limit and say so",
         two([replace(job("p", 3, instances=3, vc="a"), gang=False)], []),
         {"p": {"main-0": "n0", "main-1": "n1"}}, {"p": "LendingLimit"}, at_limit=["n0", "n1"]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_node_lending_limit(case: Case) -> None:
    d = schedule(case.snapshot)
    assert admitted(d) == case.admitted
    assert codes(d) == case.waiting
    assert victims(d) == case.victims
    if case.at_limit is not None:
        (reason,) = d.waiting.values()
        assert reason.figures["scope"] == "node"
        assert reason.figures["nodesAtLimit"] == case.at_limit
        assert "nodeLendingLimit" in reason.message and all(n in reason.message for n in case.at_limit)


def test_the_reason_says_what_each_node_holds() -> None:
    d = schedule(CASES[2].snapshot)
    assert d.waiting["p"].message == (
        "VC `a` would borrow 2 GPU, 1 CPU, 1024 MB beyond its guarantee, but borrowed work may hold at most 4 GPU on "
        "any one node (nodeLendingLimit) and the nodes with room for it are at that limit: n0 (4/4 GPU borrowed); "
        "n1 (4/4 GPU borrowed)")
    assert d.waiting["p"].figures["nodeLendingLimit"] == {"gpu": 4}


def test_off_builds_nothing() -> None:
    assert State(two([job("p", 4, vc="a")], [running("r", "n0", 4, vc="a")], limit=None)).lending is None


# ---- which running jobs borrow ---------------------------------------------------------------------------------

def r(key: str, gpu: int, *, priority: int = 10, started: float = 0.0, preempting: bool = False) -> RunningJob:
    return running(key, "n0", gpu, vc="v", priority=priority, started=started, preempting=preempting)


G8 = Resources(8, 10**6, 10**9)


@pytest.mark.parametrize(("jobs", "borrowed"), [
    pytest.param([r("a", 4), r("b", 4)], [], id="within its guarantee: none"),
    pytest.param([r("a", 4, started=1), r("b", 4, started=2), r("c", 4, started=3)], ["c"],
                 id="the most recently started borrows"),
    pytest.param([r("a", 4, started=1), r("b", 4, started=2, priority=100), r("c", 4, started=3, priority=100)],
                 ["a"], id="the lowest priority borrows, whatever its age"),
    pytest.param([r("a", 6, started=1), r("b", 4, started=2), r("c", 2, started=3)], ["b", "c"],
                 id="the first job that does not fit and every job after it"),
    pytest.param([r("a", 2, priority=-1), r("b", 4)], ["a"], id="oppo always, filling nothing"),
    pytest.param([r("a", 8, started=1), r("b", 4, started=2, preempting=True)], [],
                 id="a job being stopped is leaving"),
])
def test_borrowed_jobs(jobs: list[RunningJob], borrowed: list[str]) -> None:
    assert sorted(j.key for j in borrowed_jobs(jobs, G8)) == borrowed


# ---- configuration -------------------------------------------------------------------------------------------

def test_configuration_is_read_through_the_one_loader() -> None:
    doc = {"scheduler": {"nodeLendingLimit": {"gpu": 4, "cpu": "50%"}}}
    assert schema_errors(doc) == []
    assert parse_config(doc).scheduler.node_lending_limit == NodeLendingLimit(gpu=4, cpu="50%")
    assert parse_config({}).scheduler.node_lending_limit is None
    scenario = {"nodes": [{"name": "n0", "gpu": 8}], "scheduler": {"nodeLendingLimit": {"gpu": 2}}}
    assert scenario_snapshot(scenario).config.node_lending_limit == NodeLendingLimit(gpu=2)


@pytest.mark.parametrize(("limit", "fragment"), [
    ({"gpu": "lots"}, "scheduler.nodeLendingLimit.gpu: 'lots' is neither a number nor a percent"),
    ({"gpu": -1}, "scheduler.nodeLendingLimit.gpu: -1 is negative"),
    ({"gpus": 1}, "scheduler.nodeLendingLimit: unknown resource 'gpus'"),
    ({"gpu": True}, "scheduler.nodeLendingLimit.gpu: True is neither a number nor a percent"),
])
def test_bad_limits_are_refused(limit: dict[str, Any], fragment: str) -> None:
    doc = {"scheduler": {"nodeLendingLimit": limit}}
    assert schema_errors(doc)
    with pytest.raises(InvalidParametersError) as err:
        parse_config(doc)
    assert fragment in err.value.message


# ---- incremental passes ----------------------------------------------------------------------------------------

def test_a_borrowed_job_that_ends_lets_a_waiting_borrower_in() -> None:
    s = two([job("p", 2, vc="a")], [running("r0", "n0", 4, vc="a"), running("r1", "n1", 4, vc="a")])
    inc = IncrementalScheduler(s)
    assert codes(inc.schedule(100)) == {"p": "LendingLimit"}
    assert codes(inc.schedule(101)) == {"p": "LendingLimit"}
    inc.finished("r1")
    assert admitted(inc.schedule(102)) == {"p": {"main-0": "n1"}}


def test_a_job_that_no_longer_borrows_frees_its_node_for_borrowers() -> None:
    """``v`` is over its guarantee; its low-priority job on n1 borrows. Once its high-priority job on n0 ends, the
    one on n1 fits the guarantee: n1 holds no borrowed work and the waiting borrower goes there."""
    s = snap(nodes(2, prefix="n"), [job("p", 4, vc="a")],
             [running("hi", "n0", 2, vc="v", priority=100), running("lo", "n1", 4, vc="v"),
              running("x", "n0", 6, vc="l")],
             [vc("a", 0), vc("v", 4), vc("l", 12)], node_lending_limit=GPU4)
    inc = IncrementalScheduler(s)
    assert codes(inc.schedule(100)) == {"p": "LendingLimit"}
    inc.finished("hi")
    assert admitted(inc.schedule(101)) == {"p": {"main-0": "n1"}}


def test_a_later_start_time_can_change_which_job_borrows() -> None:
    """Two equal jobs of ``v`` over its guarantee: the newer one (on n1) borrows. The launcher reports that the one
    on n0 started later than thought: that one borrows now, n1 holds no borrowed work, and the waiting borrower
    goes there."""
    s = snap(nodes(2, prefix="n"), [job("p", 4, vc="a")],
             [running("j0", "n0", 4, vc="v", started=1), running("j1", "n1", 4, vc="v", started=2),
              running("y", "n0", 2, vc="a")],
             [vc("a", 0), vc("v", 4), vc("l", 12)], node_lending_limit=GPU4)
    inc = IncrementalScheduler(s)
    assert codes(inc.schedule(100)) == {"p": "LendingLimit"}
    inc.changed(replace(inc.running["j0"], started_at=3))
    assert admitted(inc.schedule(101)) == {"p": {"main-0": "n1"}}


LIMITS = [NodeLendingLimit(gpu=0), NodeLendingLimit(gpu=2), NodeLendingLimit(gpu="50%", cpu="50%"),
          NodeLendingLimit(memory_mb=32_000)]


def limited(s: Snapshot, limit: NodeLendingLimit) -> Snapshot:
    return replace(s, config=replace(s.config, node_lending_limit=limit))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(snapshots(), st.sampled_from(LIMITS), st.data())
def test_incremental_passes_decide_what_full_passes_decide(s: Snapshot, limit: NodeLendingLimit,
                                                           data: st.DataObject) -> None:
    """As tests/vc/test_incremental.py's, with the limit set: jobs finish, are withdrawn, arrive, are stopped; and
    the per-node borrowed work an incremental scheduler keeps is what a rebuilt State computes. A minimum run time
    of 5 s (the steps are 1, 10 or 1000 s) keeps out what incremental passes postpone by design: preempting a job
    that started since the last pass (pai.vc.incremental)."""
    s = replace(limited(s, limit), config=replace(s.config, node_lending_limit=limit, min_run_seconds=5.0))
    inc = IncrementalScheduler(s)
    assert inc.schedule(s.now) == schedule(s)
    now = s.now
    for step in range(data.draw(st.integers(1, 4))):
        now += data.draw(st.sampled_from([1, 10, 1000]))
        keys = sorted(inc.running)
        for key in data.draw(st.lists(st.sampled_from(keys), unique=True, max_size=3)) if keys else []:
            inc.finished(key)
        if bool(inc.pending) and data.draw(st.booleans()):
            inc.cancel(data.draw(st.sampled_from(sorted(inc.pending))))
        keys = sorted(k for k, r in inc.running.items() if not r.preempting)
        if bool(keys) and data.draw(st.booleans()):
            inc.changed(replace(inc.running[data.draw(st.sampled_from(keys))], preempting=True))
        for k in range(data.draw(st.integers(0, 3))) if s.pending else []:
            inc.submit(replace(data.draw(st.sampled_from(s.pending)), key=f"new{step}.{k}", submitted_at=now))
        before = replace(_equivalent(s, inc), now=now)
        reference = schedule(before)
        got = inc.schedule(now)
        assert _by_fit(got, before) == _by_fit(reference, before), step
        rebuilt = State(replace(_equivalent(s, inc), now=now))
        assert inc.state.lending is not None and rebuilt.lending is not None
        lending, fresh = inc.state.lending, rebuilt.lending
        lending.refresh(inc.state.index, inc.state.vcs)
        assert (lending.gpu, lending.cpu, lending.mem) == (fresh.gpu, fresh.cpu, fresh.mem), step


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(snapshots(), st.sampled_from(LIMITS))
def test_no_node_takes_borrowed_work_past_the_limit(s: Snapshot, limit: NodeLendingLimit) -> None:
    """Invariant: where a pass adds borrowed work to a node, the node ends within the limit on what was added."""
    state = State(limited(s, limit))
    lending = state.lending
    assert lending is not None
    before = (list(lending.gpu), list(lending.cpu), list(lending.mem))
    Round(state, s.pending, s.now).run()
    after = (lending.gpu, lending.cpu, lending.mem)
    caps = (lending.cap_gpu, lending.cap_cpu, lending.cap_mem)
    for b, a, cap in zip(before, after, caps, strict=True):
        for i in range(len(a)):
            assert a[i] <= b[i] or a[i] <= cap[i], (i, b[i], a[i], cap[i])
