"""Whole nodes per job (``extras.wholeNodes``) and the cluster rule (``wholeNodesForMultiNodeGpu``): placement, and
whole-node jobs in victim search (as victims: evicting one frees its nodes; as preemptors: every job on a node must
go)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pai.vc import Decision, PendingJob, RunningJob, Snapshot, schedule
from pai.vc.incremental import IncrementalScheduler
from pai.vc.simulate import simulate
from pai.vc.snapshot import TaskRequest
from tests.vc.test_preemption import Case, check
from tests.vc.test_properties import _check, snapshots
from tests.vc.vc_builders import AdmitCase, admitted, codes, job, node, nodes, pinned, running, snap, tasks, vc


def whole(j: PendingJob) -> PendingJob:
    return replace(j, whole_nodes=True)


def whole_running(j: RunningJob) -> RunningJob:
    return replace(j, whole_nodes=True)


def cpu_job(key: str, instances: int = 1) -> PendingJob:
    return job(key, 0, roles=tasks(0, instances, cpu=2))


A8 = [vc("a", 8), vc("b", 0)]  # a is guaranteed a node; b borrows whatever it runs

PLACEMENT = [
    AdmitCase("a whole-node job takes an idle node, not the fuller one best fit would pick",
              snap(nodes(2), [whole(job("w", 1))], [running("r", "node-0", 1)]),
              {"w"}),
    AdmitCase("each task of a whole-node job takes its own node, CPU-only tasks too",
              snap(nodes(2), [whole(cpu_job("w", 2))]),
              {"w"}),
    AdmitCase("a whole-node job waits when no node is idle",
              snap(nodes(2), [whole(job("w", 1))], [running("r0", "node-0", 1), running("r1", "node-1", 1)]),
              set(), {"w": "NoNodeFits"}),
    AdmitCase("nothing is placed beside a running whole-node job",
              snap([node("node-0")], [job("small", 1)], [whole_running(running("w", "node-0", 1))]),
              set(), {"small": "NoNodeFits"}),
    AdmitCase("without the flag the same job shares the node",
              snap([node("node-0")], [job("small", 1)], [running("w", "node-0", 1)]),
              {"small"}),
    AdmitCase("a one-task job asking for whole nodes gets one although the cluster rule is only for gangs",
              snap(nodes(2), [whole(job("w", 1)), job("small", 1)], whole_nodes_for_multi_node_gpu=True),
              {"w", "small"}),
]


@pytest.mark.parametrize("case", PLACEMENT, ids=lambda c: c.name)
def test_placement(case: AdmitCase) -> None:
    d = schedule(case.snapshot)
    assert set(admitted(d)) == case.admitted
    assert codes(d) == case.waiting


def test_placement_details() -> None:
    d = schedule(PLACEMENT[0].snapshot)
    assert admitted(d) == {"w": {"main-0": "node-1"}}
    d = schedule(PLACEMENT[1].snapshot)
    assert sorted(admitted(d)["w"].values()) == ["node-0", "node-1"]
    d = schedule(PLACEMENT[5].snapshot)
    assert {admitted(d)["w"]["main-0"], admitted(d)["small"]["main-0"]} == {"node-0", "node-1"}


VICTIMS = [
    Case("a whole-node job evicted by reclaim frees its nodes for an 8-GPU job",
         snap(nodes(2), [job("a1", 8, vc="a")], [whole_running(running("w", ["node-0", "node-1"], 1, vc="b"))], A8),
         {"w": "a1"}, {"a1": {"main-0": "node-0"}}, {"a1": "WaitingForPreemption"}),
    Case("the same with the cluster rule (a running gang of two GPU tasks)",
         snap(nodes(2), [job("a1", 8, vc="a")], [running("w", ["node-0", "node-1"], 1, vc="b")], A8,
              whole_nodes_for_multi_node_gpu=True),
         {"w": "a1"}, {"a1": {"main-0": "node-0"}}, {"a1": "WaitingForPreemption"}),
    Case("a whole-node job holding one GPU is evicted for a one-GPU job: nothing may run beside it",
         snap([node("node-0")], [job("a1", 1, vc="a")], [whole_running(running("w", "node-0", 1, vc="b"))], A8),
         {"w": "a1"}, {"a1": {"main-0": "node-0"}}),
    Case("evicting a multi-node whole-node job frees all its nodes for a gang",
         snap(nodes(2), [job("a1", 8, instances=2, vc="a", cpu=1)],
              [whole_running(running("w", ["node-0", "node-1"], 1, vc="b"))], [vc("a", 16), vc("b", 0)]),
         {"w": "a1"}, {"a1": {"main-0": "node-0", "main-1": "node-1"}}),
    Case("a whole-node job the rules may not take keeps its node closed",
         snap([node("node-0")], [job("a1", 1, vc="a")], [whole_running(running("w", "node-0", 1, vc="a"))],
              [vc("a", 8)]),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("a node shared by a whole-node job and another (rule turned on while both ran) opens only when both go",
         snap([node("node-0")], [job("a1", 1, vc="a")],
              [running("r", "node-0", 1, vc="b", priority=1), whole_running(running("w", "node-0", 1, vc="a"))],
              [vc("a", 8)]),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("a victim search that fails leaves the whole-node job's node closed to the jobs after it",
         snap(nodes(2), [job("a1", 8, instances=2, vc="a", at=1), job("b1", 1, vc="b", at=2)],
              [whole_running(running("w", "node-0", 1, vc="b")), pinned("pin", "node-1", 1, vc="b")],
              [vc("a", 16), vc("b", 0)]),
         {}, waiting={"a1": "HeldByNonPreemptible"}, admitted={"b1"}),
    Case("a whole-node preemptor takes every job of a node, the cheapest node first",
         snap(nodes(2), [whole(job("p", 1, priority=100))],
              [running("low1", "node-0", 2, priority=1), running("low2", "node-0", 2, priority=1, started=5),
               running("mid", "node-1", 1, priority=50)]),
         {"low1": "p", "low2": "p"}, {"p": {"main-0": "node-0"}}),
    Case("a non-preemptible job keeps a whole-node preemptor off its node",
         snap(nodes(2), [whole(job("p", 1, priority=100))],
              [pinned("pin", "node-0", 1, priority=1), running("mid", "node-1", 1, priority=50)]),
         {"mid": "p"}, {"p": {"main-0": "node-1"}}),
    Case("a whole-node preemptor waits when every node runs non-preemptible work",
         snap([node("node-0")], [whole(job("p", 1, priority=100))],
              [pinned("pin", "node-0", 1, priority=1), running("r", "node-0", 1, priority=1)]),
         {}, waiting={"p": "HeldByNonPreemptible"}),
    Case("a whole-node job being stopped for the waiting job holds its node for it",
         snap([node("node-0")], [job("a1", 1, vc="a")],
              [whole_running(running("w", "node-0", 1, vc="b", preempting=True, preempted_by="a1"))], A8),
         {}, {"a1": {"main-0": "node-0"}}, {"a1": "WaitingForPreemption"}),
    Case("a whole-node victim claimed by one job is not offered to the next",
         snap([node("node-0")], [job("a1", 1, vc="a", at=1), job("a2", 1, vc="a", at=2)],
              [whole_running(running("w", "node-0", 1, vc="b"))], A8),
         {"w": "a1"}, {"a1": {"main-0": "node-0"}}, {"a1": "WaitingForPreemption", "a2": "NoNodeFits"}),
    Case("selector and preemption: victims only on matching nodes, though a cheaper one runs elsewhere",
         snap([node("a0", labels={"zone": "a"}), node("b0", labels={"zone": "b"})],
              [job("p", 8, priority=100, selector={"zone": "a"})],
              [running("on-a", "a0", 8, priority=50), running("on-b", "b0", 8, priority=1)]),
         {"on-a": "p"}, {"p": {"main-0": "a0"}}),
    Case("selector and preemption: no allowed victim on the matching nodes, nothing is preempted",
         snap([node("a0", labels={"zone": "a"}), node("b0", labels={"zone": "b"})],
              [job("p", 8, priority=100, selector={"zone": "a"})],
              [running("on-a", "a0", 8, priority=100), running("on-b", "b0", 8, priority=1)]),
         {}, waiting={"p": "NoNodeFits"}),
    Case("a whole-node preemptor with a selector evicts the whole-node job on the matching node",
         snap([node("a0", labels={"zone": "a"}), node("b0", labels={"zone": "b"})],
              [whole(job("p", 1, priority=100, selector={"zone": "a"}))],
              [whole_running(running("wa", "a0", 1, priority=50)), whole_running(running("wb", "b0", 1, priority=1))]),
         {"wa": "p"}, {"p": {"main-0": "a0"}}),
]


@pytest.mark.parametrize("case", VICTIMS, ids=lambda c: c.name)
def test_whole_node_victims(case: Case) -> None:
    check(case)


def test_a_node_held_whole_is_named_in_the_reason() -> None:
    d = schedule(PLACEMENT[3].snapshot)
    reason = d.waiting["small"]
    assert "runs a job that holds it whole" in reason.message and "node-0" in reason.message
    assert reason.figures["wholeNodes"] == 1


def test_an_incremental_pass_keeps_a_started_whole_node_job_alone_and_frees_its_node_when_it_ends() -> None:
    inc = IncrementalScheduler(snap([node("node-0")], [whole(job("w", 1))]))
    assert set(admitted(inc.schedule(1.0))) == {"w"}
    assert inc.running["w"].whole_nodes
    inc.submit(job("small", 1, at=2.0))
    assert codes(inc.schedule(2.0)) == {"small": "NoNodeFits"}
    assert codes(inc.schedule(2.5, full=True)) == {"small": "NoNodeFits"}
    inc.finished("w")
    assert set(admitted(inc.schedule(3.0))) == {"small"}


def test_an_incremental_pass_frees_a_whole_node_victim_for_its_preemptor() -> None:
    s = snap([node("node-0")], [job("a1", 1, vc="a")], [whole_running(running("w", "node-0", 1, vc="b"))], A8)
    inc = IncrementalScheduler(s)
    assert {p.victim for p in inc.schedule(100.0).preemptions} == {"w"}
    assert codes(inc.schedule(101.0)) == {"a1": "WaitingForPreemption"}
    inc.finished("w")
    assert set(admitted(inc.schedule(102.0))) == {"a1"}


def test_equal_tasks_asking_and_not_asking_for_whole_nodes_are_different_shapes() -> None:
    ts: tuple[TaskRequest, ...] = tasks(1)
    d = schedule(snap([node("node-0")], [job("plain", roles=ts, at=1), whole(job("w", roles=ts, at=2))],
                      [running("r", "node-0", 1)]))
    assert set(admitted(d)) == {"plain"} and codes(d) == {"w": "NoNodeFits"}


def test_a_failed_search_gives_the_whole_node_job_its_node_back() -> None:
    (case,) = [c for c in VICTIMS if c.name.startswith("a victim search that fails")]
    assert admitted(schedule(case.snapshot))["b1"] == {"main-0": "node-1"}


def test_a_what_if_scenario_may_ask_for_whole_nodes() -> None:
    scenario = {
        "nodes": [{"name": "n0", "gpu": 8, "cpu": 32, "memoryMB": 256_000},
                  {"name": "n1", "gpu": 8, "cpu": 32, "memoryMB": 256_000}],
        "running": [{"name": "w", "wholeNodes": True, "tasks": [{"gpu": 1, "cpu": 1, "memoryMB": 1, "node": "n0"}]}],
        "pending": [{"name": "p", "wholeNodes": True, "submittedAt": 1, "tasks": [{"gpu": 1, "cpu": 1, "memoryMB": 1}]},
                    {"name": "s", "submittedAt": 2, "tasks": [{"gpu": 1, "cpu": 1, "memoryMB": 1}]}],
    }
    got = simulate(scenario)
    assert got["admitted"] == {"p": {"main-0": "n1"}}
    assert got["waiting"]["s"]["code"] == "NoNodeFits"


@st.composite
def whole_snapshots(draw: st.DrawFn) -> Snapshot:
    """The property tests' random snapshots, some jobs asking for whole nodes (a running one only where it is alone
    on its nodes, as the scheduler would have placed it); the cluster rule off, so the flags alone decide."""
    s = draw(snapshots())
    jobs_on: dict[str, set[str]] = {}
    for r in s.running:
        for _, n in r.tasks:
            jobs_on.setdefault(n, set()).add(r.key)
    running = [replace(r, whole_nodes=True)
               if all(jobs_on[n] == {r.key} for _, n in r.tasks) and draw(st.booleans()) else r for r in s.running]
    pending = [replace(p, whole_nodes=draw(st.booleans())) for p in s.pending]
    return replace(s, running=tuple(running), pending=tuple(pending),
                   config=replace(s.config, whole_nodes_for_multi_node_gpu=False))


def _alone(s: Snapshot, d: Decision) -> None:
    """Every whole-node job is alone on each of its nodes: now, and once every victim has exited."""
    whole = {r.key for r in s.running if r.whole_nodes} | {p.key for p in s.pending if p.whole_nodes}
    for planned in (False, True):
        gone = {p.victim for p in d.preemptions} | {r.key for r in s.running if r.preempting} if planned else set()
        on: dict[str, set[str]] = {}
        for r in s.running:
            if r.key not in gone:
                for _, n in r.tasks:
                    on.setdefault(n, set()).add(r.key)
        for a in (*d.admissions, *(d.planned.values() if planned else ())):
            for p in a.placements:
                on.setdefault(p.node, set()).add(a.job)
        for n, keys in on.items():
            assert not (keys & whole) or len(keys) == 1, (planned, n, keys)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(whole_snapshots())
def test_whole_node_jobs_are_alone_on_their_nodes(s: Snapshot) -> None:
    d = schedule(s)
    _check(s, d)
    _alone(s, d)


def test_the_whole_node_generator_evicts_whole_node_jobs() -> None:
    """The property above sees whole-node victims, not only whole-node placements."""
    seen: list[int] = []

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True,
              database=None)
    @given(whole_snapshots())
    def collect(s: Snapshot) -> None:
        whole = {r.key for r in s.running if r.whole_nodes}
        seen.append(sum(1 for p in schedule(s).preemptions if p.victim in whole))

    collect()
    assert sum(seen) > 0
