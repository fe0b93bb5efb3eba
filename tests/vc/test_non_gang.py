"""Non-gang jobs (OpenPAI ``gangAllocation: false``): placed task by task, as each task fits (pai.vc.nongang)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pai.domain.resources import ZERO, Resources
from pai.vc import Decision, PendingJob, RunningJob, Snapshot, TaskRequest, schedule
from pai.vc.incremental import IncrementalScheduler
from pai.vc.policy import WithinVc
from tests.vc.test_incremental import _equivalent, _same_state
from tests.vc.test_properties import snapshots
from tests.vc.vc_builders import admitted, codes, job, node, running, snap, vc, victims


def loose(key: str, gpu: int = 1, **kw: Any) -> PendingJob:
    """A non-gang job."""
    return replace(job(key, gpu, **kw), gang=False)


def placed_part(pending: PendingJob, on: list[str], started: float = 50.0) -> tuple[RunningJob, PendingJob]:
    """A non-gang job with its first tasks on ``on``: its running part, and its pending part (same key)."""
    tasks = pending.tasks
    done = tuple((t, n) for t, n in zip(tasks, on, strict=False))
    run = RunningJob(pending.key, pending.vc, pending.user, pending.priority, started, done, gang=False)
    return run, replace(pending, tasks=tasks[len(on):])


@dataclass
class Case:
    name: str
    snapshot: Snapshot
    admitted: dict[str, dict[str, str]]  # job -> {"role-index": node}
    waiting: dict[str, str] = field(default_factory=dict)  # job -> reason code
    victims: dict[str, str] = field(default_factory=dict)  # victim -> preemptor


def R(gpu: int) -> Resources:
    return Resources(gpu, 1, 1024)


FOUR = loose("ng", 2, instances=4)
RUN2, REST2 = placed_part(FOUR, ["n0", "n0"])
BUSY = running("busy", "n1", 4)

CASES = [
    Case("4 tasks, 2 fit: 2 placed, 2 wait",
         snap([node("n0", 4), node("n1", 4)], [FOUR], [BUSY]),
         {"ng": {"main-0": "n0", "main-1": "n0"}}, {"ng": "NoNodeFits"}),
    Case("a gang job of the same shape places none",
         snap([node("n0", 4), node("n1", 4)], [job("g", 2, instances=4)], [BUSY]),
         {}, {"g": "NoNodeFits"}),
    Case("capacity freed later: the rest of a partly running job is placed",
         snap([node("n0", 4), node("n1", 4)], [REST2], [RUN2]),
         {"ng": {"main-2": "n1", "main-3": "n1"}}),
    Case("the rest waits while its placed tasks hold the node, and preempts nothing of its own",
         snap([node("n0", 4)], [REST2], [RUN2], [vc("default", within=WithinVc.LOWER_OR_NEWER_EQUAL_PRIORITY)]),
         {}, {"ng": "NoNodeFits"}),
    Case("every task fits: the whole job is placed",
         snap([node("n0", 8)], [FOUR]),
         {"ng": {"main-0": "n0", "main-1": "n0", "main-2": "n0", "main-3": "n0"}}),
    Case("tasks spread over nodes, each best fit",
         snap([node("n0", 2), node("n1", 3)], [loose("ng", 2, instances=3)]),
         {"ng": {"main-0": "n0", "main-1": "n1"}}, {"ng": "NoNodeFits"}),
    Case("a big task that does not fit does not keep the small ones out",
         snap([node("n0", 2)], [loose("ng", roles=(TaskRequest("big", 0, R(4)), TaskRequest("small", 0, R(1)),
                                                      TaskRequest("small", 1, R(1))))]),
         {"ng": {"small-0": "n0", "small-1": "n0"}}, {"ng": "NeverFits"}),
    Case("the VC's max is checked task by task",
         snap([node("n0", 8)], [loose("ng", 1, instances=4)], vcs=[vc("default", max=2)]),
         {"ng": {"main-0": "n0", "main-1": "n0"}}, {"ng": "VcAtMax"}),
    Case("the user's GPU limit is checked task by task",
         snap([node("n0", 8)], [loose("ng", 1, instances=4)], vcs=[vc("default", user_gpu=3)]),
         {"ng": {"main-0": "n0", "main-1": "n0", "main-2": "n0"}}, {"ng": "UserLimit"}),
    Case("a higher-priority gang job goes first; the non-gang job takes what is left",
         snap([node("n0", 4)], [loose("ng", 1, instances=4, at=1), job("g", 1, instances=3, priority=20, at=2)]),
         {"g": {"main-0": "n0", "main-1": "n0", "main-2": "n0"}, "ng": {"main-0": "n0"}}, {"ng": "NoNodeFits"}),
    Case("a higher-priority non-gang job goes first; a gang job that no longer fits waits",
         snap([node("n0", 4)], [loose("ng", 1, instances=3, priority=20, at=2), job("g", 1, instances=2, at=1)]),
         {"ng": {"main-0": "n0", "main-1": "n0", "main-2": "n0"}}, {"g": "NoNodeFits"}),
    Case("a later job uses what the waiting tasks leave",
         snap([node("n0", 3)], [loose("ng", 2, instances=2, at=1), job("small", 1, at=2)]),
         {"ng": {"main-0": "n0"}, "small": {"main-0": "n0"}}, {"ng": "NoNodeFits"}),
    Case("strict FIFO: the jobs behind a job with waiting tasks wait",
         snap([node("n0", 3)], [loose("ng", 2, instances=2, at=1), job("small", 1, at=2)],
              vcs=[vc("default", strict_fifo=True)]),
         {"ng": {"main-0": "n0"}}, {"ng": "NoNodeFits", "small": "StrictFifo"}),
    Case("wholeNodesForMultiNodeGpu is for gangs: non-gang tasks share a node",
         snap([node("n0", 8), node("n1", 8)], [loose("ng", 2, instances=2)], whole_nodes_for_multi_node_gpu=True),
         {"ng": {"main-0": "n0", "main-1": "n0"}}),
    Case("a pass that places nothing preempts for the next task only",
         snap([node("n0", 4)], [loose("a1", 2, instances=2, vc="a")],
              [running("b1", "n0", 2, vc="b", started=1), running("b2", "n0", 2, vc="b", started=2)],
              [vc("a", 4), vc("b", 0)]),
         {}, {"a1": "WaitingForPreemption"}, {"b2": "a1"}),
    Case("a gang of the same shape preempts for all its tasks",
         snap([node("n0", 4)], [job("a1", 2, instances=2, vc="a")],
              [running("b1", "n0", 2, vc="b", started=1), running("b2", "n0", 2, vc="b", started=2)],
              [vc("a", 4), vc("b", 0)]),
         {}, {"a1": "WaitingForPreemption"}, {"b1": "a1", "b2": "a1"}),
    Case("a pass that places some tasks preempts for the next one",
         snap([node("n0", 4)], [loose("a1", 2, instances=3, vc="a")],
              [running("b2", "n0", 2, vc="b", started=2)], [vc("a", 6), vc("b", 0)]),
         {"a1": {"main-0": "n0"}}, {"a1": "WaitingForPreemption"}, {"b2": "a1"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_non_gang(case: Case) -> None:
    d = schedule(case.snapshot)
    assert admitted(d) == case.admitted
    assert codes(d) == case.waiting
    assert victims(d) == case.victims


def test_reason_says_how_many_tasks_wait() -> None:
    d = schedule(snap([node("n0", 4), node("n1", 4)], [FOUR], [BUSY]))
    reason = d.waiting["ng"]
    assert reason.message.startswith("2 tasks wait to be placed (gangAllocation: false): no node has 2 free GPUs")
    assert reason.figures["tasksWaiting"] == 2


def test_preemption_plans_the_next_task() -> None:
    s = snap([node("n0", 4)], [loose("a1", 2, instances=2, vc="a")],
             [running("b1", "n0", 2, vc="b", started=1), running("b2", "n0", 2, vc="b", started=2)],
             [vc("a", 4), vc("b", 0)])
    d = schedule(s)
    assert {p.role + str(p.index): p.node for p in d.planned["a1"].placements} == {"main0": "n0"}


def test_incremental_places_the_rest_as_capacity_frees() -> None:
    s = snap([node("n0", 4)], [FOUR], [running("other", "n0", 0)])
    inc = IncrementalScheduler(s)
    first = inc.schedule(s.now)
    assert first == schedule(s)
    assert admitted(first) == {"ng": {"main-0": "n0", "main-1": "n0"}}
    assert [(t.index, n) for t, n in inc.running["ng"].tasks] == [(0, "n0"), (1, "n0")]
    assert [t.index for t in inc.pending["ng"].tasks] == [2, 3]
    # nothing freed: the rest keeps waiting
    assert admitted(inc.schedule(s.now + 1)) == {}
    # its first two tasks end (the launcher follows the job: its running part, then its pending part)
    inc.finished("ng")
    inc.submit(inc.pending.pop("ng"))
    second = inc.schedule(s.now + 2)
    assert admitted(second) == {"ng": {"main-2": "n0", "main-3": "n0"}}
    assert "ng" not in inc.pending
    assert [(t.index, n) for t, n in inc.running["ng"].tasks] == [(2, "n0"), (3, "n0")]


def test_incremental_grows_the_running_part() -> None:
    s = snap([node("n0", 4), node("n1", 2)], [FOUR], [running("b", "n1", 2)])
    inc = IncrementalScheduler(s)
    inc.schedule(s.now)
    inc.finished("b")
    d = inc.schedule(s.now + 1)
    assert admitted(d) == {"ng": {"main-2": "n1"}}
    assert sorted(t.index for t, _ in inc.running["ng"].tasks) == [0, 1, 2]
    assert [t.index for t in inc.pending["ng"].tasks] == [3]
    # the grown state is the one a full pass would build from the same jobs
    rebuilt = IncrementalScheduler(_equivalent(s, inc))
    _same_state(inc.state, rebuilt.state)
    assert inc.state.index.jobs == rebuilt.state.index.jobs


@st.composite
def loose_snapshots(draw: st.DrawFn) -> Snapshot:
    """Random snapshots (test_properties) with some waiting jobs made non-gang."""
    s = draw(snapshots())
    pending = tuple(replace(p, gang=False) if draw(st.booleans()) else p for p in s.pending)
    return replace(s, pending=pending)


def _use(s: Snapshot, d: Decision, *, planned: bool) -> tuple[dict[str, Resources], dict[str, Resources]]:
    """Per-node and per-VC use of what runs and what the decision places (task by task); ``planned``: once the
    victims have exited and the planned jobs start."""
    gone = {p.victim for p in d.preemptions} | {r.key for r in s.running if r.preempting} if planned else set()
    pending = {p.key: p for p in s.pending}
    node_use: dict[str, Resources] = defaultdict(lambda: ZERO)
    vc_use: dict[str, Resources] = defaultdict(lambda: ZERO)
    for r in s.running:
        if r.key not in gone:
            vc_use[r.vc] = vc_use[r.vc] + r.request
            for t, n in r.tasks:
                node_use[n] = node_use[n] + t.resources
    for a in [*d.admissions, *(d.planned.values() if planned else ())]:
        job = pending[a.job]
        by_task = {(t.role, t.index): t for t in job.tasks}
        for p in a.placements:
            need = by_task[(p.role, p.index)].resources
            node_use[p.node] = node_use[p.node] + need
            vc_use[job.vc] = vc_use[job.vc] + need
    return node_use, vc_use


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(loose_snapshots())
def test_non_gang_decisions_keep_capacity_and_quota(s: Snapshot) -> None:
    d = schedule(s)
    pending = {p.key: p for p in s.pending}
    admitted_keys = {a.job for a in d.admissions}
    assert admitted_keys | set(d.waiting) == set(pending)
    for a in (*d.admissions, *d.planned.values()):
        job = pending[a.job]
        mine = [(p.role, p.index) for p in a.placements]
        assert len(mine) == len(set(mine)) and set(mine) <= {(t.role, t.index) for t in job.tasks}
        if job.gang:
            assert len(mine) == len(job.tasks)
        elif a is d.planned.get(a.job):
            assert len(mine) == 1  # a non-gang job plans for its next task only
        if a.job in d.waiting and a in d.admissions:
            assert not job.gang  # only a non-gang job is both placed (in part) and waiting
    nodes = {n.name: n for n in s.nodes}
    maxes = {q.name: q.max for q in s.vcs}
    for planned in (False, True):
        node_use, vc_use = _use(s, d, planned=planned)
        for name, use in node_use.items():
            assert use.fits_in(nodes[name].usable), (planned, name, use)
        for name, use in vc_use.items():
            mx = maxes.get(name)
            assert mx is None or use.fits_in(mx), (planned, name, use, mx)
    assert IncrementalScheduler(s).schedule(s.now) == d
