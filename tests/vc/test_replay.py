"""Trace replay: tiny workloads whose outcome can be worked out by hand, through the real scheduler."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from pai.domain.errors import InvalidParametersError
from pai.vc.config import ClusterConfig, parse_config
from pai.vc.replay import LiveJob, Setup, replay
from pai.vc.replay_log import JobOutcome, ReplayLog
from pai.vc.replay_report import Spread, percentile, report
from pai.vc.snapshot import NodeView
from pai.vc.trace import Trace, TraceJob, parse_trace, trace_lines
from tests.vc.vc_builders import node, running, tasks

RECLAIM = {"virtualClusters": [{"name": "a", "guaranteed": {"gpu": 8, "cpu": 32, "memoryMB": 256_000}},
                               {"name": "b"}]}


def tj(name: str, at: float, duration: float, gpu: int = 8, *, instances: int = 1, vc: str = "default",
       priority: int | str = 10) -> TraceJob:
    return TraceJob(name, at, duration, tasks(gpu, instances), vc=vc, user="u", priority=priority)


def run(jobs: list[TraceJob], nodes: list[NodeView] | None = None, config: dict[str, Any] | None = None,
        **kw: Any) -> tuple[ReplayLog, dict[str, JobOutcome]]:
    log = replay(Setup(nodes=tuple(nodes or [node("n1")]), jobs=tuple(jobs),
                       config=parse_config(config) if config else ClusterConfig(), **kw))
    return log, {j.key: j for j in log.jobs}


@dataclass
class Case:
    """What each job's (first start, completion, preemptions) should be, and the cluster's figures."""

    name: str
    jobs: list[TraceJob]
    expect: dict[str, tuple[float | None, float | None, int]]
    config: dict[str, Any] | None = None
    nodes: list[NodeView] = field(default_factory=lambda: [node("n1")])
    figures: dict[str, Any] = field(default_factory=dict)
    setup: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("two 8-GPU jobs on one 8-GPU node: the second waits exactly the first's duration",
         [tj("first", 0, 100), tj("second", 0, 50)],
         {"first": (0, 100, 0), "second": (100, 150, 0)},
         figures={"utilization": 1.0, "preemptions": 0, "span": 150}),
    Case("a job that fits beside another starts at once",
         [tj("a", 0, 100, gpu=4), tj("b", 10, 100, gpu=4)],
         {"a": (0, 100, 0), "b": (10, 110, 0)}),
    Case("reclaim: the borrower is preempted, exits after the grace period, restarts from scratch",
         [tj("borrower", 0, 1000, vc="b"), tj("owner", 100, 100, vc="a")],
         {"owner": (110, 210, 0), "borrower": (0, 1210, 1)},
         config=RECLAIM, figures={"preemptions": 1, "lost_gpu_hours": 8 * 110 / 3600, "span": 1210}),
    Case("no reclaim: the owner waits for the borrower to finish",
         [tj("borrower", 0, 1000, vc="b"), tj("owner", 100, 100, vc="a")],
         {"owner": (1000, 1100, 0), "borrower": (0, 1000, 0)},
         config={"virtualClusters": [{**RECLAIM["virtualClusters"][0], "preemption": {"reclaim": "Never"}},
                                     {"name": "b"}]}),
    Case("a job that may not be preempted keeps its borrowed capacity; the owner waits for it to finish",
         [replace(tj("borrower", 0, 1000, vc="b"), preemptible=False), tj("owner", 100, 100, vc="a")],
         {"owner": (1000, 1100, 0), "borrower": (0, 1000, 0)},
         config=RECLAIM, figures={"preemptions": 0}),
    Case("a zero grace period: the victim exits in the same instant, the preemptor starts then",
         [tj("borrower", 0, 1000, vc="b"), tj("owner", 100, 100, vc="a")],
         {"owner": (100, 200, 0), "borrower": (0, 1200, 1)},
         config=RECLAIM, setup={"grace_seconds": 0}),
    Case("a victim that finishes during its grace period completes",
         [tj("borrower", 0, 105, vc="b"), tj("owner", 100, 100, vc="a")],
         {"owner": (105, 205, 0), "borrower": (0, 105, 1)},
         config=RECLAIM, figures={"lost_gpu_hours": 0}),
    Case("minRunSeconds: the reclaim waits for the launcher's next full pass after the minimum run time",
         [tj("borrower", 0, 1000, vc="b"), tj("owner", 100, 100, vc="a")],
         # full passes at 0, 100, then every 60 s while the owner waits: 160, 220, 280, 340 (300 has passed)
         {"owner": (350, 450, 0), "borrower": (0, 1450, 1)},
         config={**RECLAIM, "scheduler": {"minRunSeconds": 300}}),
    Case("a job larger than the cluster never runs and the replay still ends",
         [tj("huge", 0, 100, instances=2), tj("ok", 50, 100)],
         {"huge": (None, None, 0), "ok": (50, 150, 0)},
         figures={"never_ran": {"NeverFits": 1}, "span": 150}),
    Case("a job of a VC the configuration lacks never runs",
         [tj("lost", 0, 100, vc="nope")], {"lost": (None, None, 0)},
         figures={"never_ran": {"UnknownVc": 1}}),
    Case("utilization: half the GPUs for the first 100 s, idle, then all of them for 100 s",
         [tj("half", 0, 100, gpu=4), tj("whole", 200, 100)],
         {"half": (0, 100, 0), "whole": (200, 300, 0)},
         figures={"utilization": (400 + 800) / (8 * 300), "utilization_arrivals": 400 / (8 * 200), "span": 300}),
    Case("until: a job still running is not complete; a later arrival is not in the replay",
         [tj("long", 0, 1000), tj("later", 600, 10)],
         {"long": (0, None, 0)}, setup={"until": 500},
         figures={"utilization": 1.0, "span": 500, "never_ran": {}}),
    Case("priority class names are the configuration's: `urgent` (500) preempts within its VC, `test` waits",
         [tj("blocker", 0, 100), tj("test", 10, 10, priority="test"), tj("urgent", 20, 10, priority="urgent")],
         {"urgent": (30, 40, 0), "blocker": (0, 140, 1), "test": (140, 150, 0)},
         config={"priorityClasses": {"urgent": 500}}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_replay(case: Case) -> None:
    log, jobs = run(case.jobs, case.nodes, case.config, **case.setup)
    got = {k: (jobs[k].started_at, jobs[k].completed_at, jobs[k].preemptions) for k in case.expect}
    assert got == case.expect
    r = report(log)
    figures = {"utilization": r.utilization, "utilization_arrivals": r.utilization_arrivals,
               "preemptions": r.overall.preemptions, "lost_gpu_hours": r.lost_gpu_hours, "span": r.span_seconds,
               "never_ran": r.never_ran}
    for name, want in case.figures.items():
        assert figures[name] == (pytest.approx(want) if isinstance(want, float) else want), name


def test_queueing_delay_and_completion_time_per_vc_and_overall() -> None:
    log, _ = run([tj("borrower", 0, 1000, vc="b"), tj("owner", 100, 100, vc="a")], config=RECLAIM)
    r = report(log)
    a, b = (next(g for g in r.vcs if g.name == name) for name in ("a", "b"))
    assert (a.queueing.mean, a.completion.mean, a.preemptions) == (10, 110, 0)
    assert (b.queueing.mean, b.completion.mean, b.preemptions) == (0, 1210, 1)
    assert (r.overall.jobs, r.overall.completed, r.overall.completion.p50, r.overall.completion.p99) == (2, 2, 110,
                                                                                                         1210)
    assert [g.name for g in r.vcs] == ["a", "b", "default"]  # the configuration's VCs, each with a row


def test_a_preempted_job_is_requeued_with_its_original_submission_time() -> None:
    # After the owner, both the requeued borrower (submitted at 0) and a newer b job (at 50) wait for the node:
    # the borrower goes first, as the launcher requeues it (submission time kept).
    log, jobs = run([tj("borrower", 0, 1000, vc="b"), tj("newer", 50, 10, vc="b"), tj("owner", 100, 100, vc="a")],
                    config=RECLAIM)
    assert jobs["borrower"].completed_at == 210 + 1000
    assert jobs["newer"].started_at == 1210


def test_live_jobs_hold_their_nodes_and_are_requeued_when_preempted() -> None:
    live = LiveJob(running("alice~live", "n1", gpu=8, vc="b", started=-500), submitted_at=-600, remaining=1000,
                   duration=300)
    log, jobs = run([tj("owner", 100, 100, vc="a")], config=RECLAIM, running=(live,))
    assert jobs["owner"].started_at == 110
    # preempted at 100, requeued, restarts at 210 and runs its full (assumed) duration
    assert (jobs["alice~live"].completed_at, jobs["alice~live"].preemptions, jobs["alice~live"].live) == (510, 1, True)
    r = report(log)
    assert r.overall.jobs == 1 and r.overall.preemptions == 1  # a live running job counts in preemptions only
    assert r.utilization == pytest.approx((8 * 110 + 8 * 100 + 8 * 300) / (8 * 510))


def test_a_live_job_being_stopped_exits_after_the_grace_period_and_is_not_requeued() -> None:
    live = LiveJob(running("alice~stop", "n1", gpu=8, started=-50, preempting=True), submitted_at=-60,
                   remaining=3600, duration=3600, stopping=True)
    _, jobs = run([tj("next", 0, 100)], running=(live,))
    assert jobs["next"].started_at == 10
    assert jobs["alice~stop"].completed_at is None and jobs["alice~stop"].reason == ""


def test_live_tasks_on_unknown_nodes_are_refused() -> None:
    live = LiveJob(running("alice~x", "elsewhere"), submitted_at=0, remaining=1, duration=1)
    with pytest.raises(InvalidParametersError, match="unknown nodes: elsewhere"):
        run([], running=(live,))


def test_an_unknown_priority_class_names_the_job() -> None:
    with pytest.raises(InvalidParametersError, match="job j: unknown priority class 'gold'"):
        run([tj("j", 0, 10, priority="gold")])


@pytest.mark.parametrize(("values", "want"), [
    ([], Spread()),
    ([5.0], Spread(1, 5, 5, 5, 5)),
    ([float(x) for x in range(1, 21)], Spread(20, 10.5, 10, 19, 20)),
    ([float(x) for x in range(100, 0, -1)], Spread(100, 50.5, 50, 95, 99)),
])
def test_spread_is_nearest_rank(values: list[float], want: Spread) -> None:
    assert Spread.of(values) == want
    if values:
        assert percentile(sorted(values), 1.0) == max(values)


# ---- the trace format -------------------------------------------------------------------------------------------

TRACE = """{"trace": 1, "nodes": [{"name": "gpu", "count": 3, "gpu": 8, "cpu": 64, "memoryMB": 512000},
{"name": "cpu-1", "gpu": 0, "cpu": 16, "memoryMB": 65536, "labels": {"zone": "b"}}]}
# a comment, then a blank line

{"name": "b", "submittedAt": 20, "duration": 5, "preemptible": false,
 "tasks": [{"gpu": 8, "cpu": 8, "memoryMB": 1, "instances": 2}]}
{"name": "a", "submittedAt": 10, "duration": 60.5, "vc": "dev", "user": "bob", "priority": "prod",
 "tasks": [{"gpu": 1, "cpu": 2, "memoryMB": 3}, {"role": "ps", "gpu": 0, "cpu": 1, "memoryMB": 1}]}
""".replace(",\n{", ", {").replace(",\n ", ", ")


def test_a_trace_is_read_with_its_header_nodes_and_jobs_in_arrival_order() -> None:
    trace = parse_trace(TRACE.splitlines())
    assert [n.name for n in trace.nodes] == ["gpu-1", "gpu-2", "gpu-3", "cpu-1"]
    assert trace.nodes[3].labels == {"zone": "b"}
    assert [j.name for j in trace.jobs] == ["a", "b"]
    a, b = trace.jobs
    assert (a.vc, a.user, a.priority, a.duration, a.gpus, a.preemptible) == ("dev", "bob", "prod", 60.5, 1, True)
    assert [(t.role, t.index) for t in a.tasks] == [("main", 0), ("ps", 0)]
    assert (b.vc, b.priority, [t.index for t in b.tasks], b.gpus, b.preemptible) == ("default", 10, [0, 1], 16, False)


def test_a_trace_written_reads_back_the_same() -> None:
    trace = parse_trace(TRACE.splitlines())
    again = parse_trace(list(trace_lines(trace)))
    assert (again.jobs, again.nodes) == (trace.jobs, trace.nodes)
    assert json.loads(next(trace_lines(trace)))["nodes"][0] == {"name": "gpu", "count": 3, "gpu": 8, "cpu": 64,
                                                                 "memoryMB": 512000}


@pytest.mark.parametrize(("lines", "message"), [
    (['{"name": "j", "duration": 1}'], "line 1: tasks: a job needs at least one task"),
    (['{"name": "j", "tasks": [{"gpu": 1}]}'], "line 1: duration: is required"),
    (['{"name": "j", "duration": -1, "tasks": [{"gpu": 1}]}'], "line 1: duration: expected a number of seconds"),
    (['', '{"name": "j", "duration": 1, "tasks": [{"gpu": "two"}]}'], "line 2: tasks[0].gpu: expected an integer"),
    (['{"name": "j", "duration": 1, "priority": true, "tasks": [{"gpu": 1}]}'], "line 1: priority"),
    (['{"duration": 1, "tasks": [{"gpu": 1}]}'], "line 1: name: a job needs a name"),
    (['{"name": "j", "duration": 1, "preemptible": "no", "tasks": [{"gpu": 1}]}'], "line 1: preemptible: expected"),
    (['not json'], "line 1: not JSON"),
    (['[1]'], "line 1: expected a JSON object"),
    (['{"name": "j", "duration": 1, "tasks": [{"gpu": 1}]}'] * 2, "line 2: job 'j' is listed twice"),
    (['{"name": "j", "duration": 1, "tasks": [{"gpu": 1}]}', '{"trace": 1}'],
     "line 2: the header must be the first line"),
    (['{"trace": 1, "nodes": [{"gpu": 8}]}'], "line 1: nodes[0]: a node needs a name"),
    (['{"trace": 1, "nodes": [{"name": "n", "gpu": 8}, {"name": "n"}]}'], "line 1: nodes: node names repeat"),
])
def test_a_bad_trace_names_the_line_and_the_field(lines: list[str], message: str) -> None:
    with pytest.raises(InvalidParametersError) as e:
        parse_trace(lines)
    assert e.value.message.startswith(message)


def test_an_empty_trace_replays_to_nothing() -> None:
    log, jobs = run(list(parse_trace([]).jobs))
    assert jobs == {} and log.passes == 0 and report(log).utilization == 0
    assert Trace(()).nodes == ()


def test_the_replay_keeps_the_launchers_timing() -> None:
    """The replay, the launcher, the master's options and the stop command take their defaults from one place."""
    from pai.commands.master import master
    from pai.domain.timing import FULL_PASS_SECONDS, GRACE_SECONDS
    from pai.launcher.scheduling import Scheduling
    from pai.launcher.service import LauncherConfig
    from pai.protocol.messages import StopTask

    options = {p.name: p.default for p in master.params}
    setup = Setup(nodes=(), jobs=())
    assert (setup.full_pass_seconds, setup.grace_seconds) == (FULL_PASS_SECONDS, GRACE_SECONDS)
    assert (LauncherConfig().full_pass_seconds, LauncherConfig().grace_seconds) == (FULL_PASS_SECONDS, GRACE_SECONDS)
    assert Scheduling().full_pass_seconds == FULL_PASS_SECONDS
    assert (options["full_pass_seconds"], options["grace_seconds"]) == (FULL_PASS_SECONDS, GRACE_SECONDS)
    assert StopTask("a").grace_seconds == StopTask.from_dict({"attemptId": "a"}).grace_seconds == GRACE_SECONDS


def test_a_periodic_pass_due_at_a_rounded_instant_is_full_and_time_moves_on() -> None:
    # (8154.5984 + 60) - 8154.5984 is a hair under 60: the pass due then once repeated forever at that instant
    at = 8154.5984
    log, jobs = run([tj("holder", at, 1000), tj("waiter", at, 10)], until=at + 200)
    assert log.passes < 10 and log.full_passes == log.passes
    assert jobs["waiter"].started_at is None
