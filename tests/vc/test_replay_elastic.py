"""Elastic jobs in the replay: resized as the scheduler decides, finishing as their size says (worked out by hand)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from pai.domain.errors import InvalidParametersError
from pai.vc.config import parse_config
from pai.vc.replay import Setup, is_elastic, replay, rigid
from pai.vc.replay_report import report
from pai.vc.snapshot import ElasticRole
from pai.vc.trace import Trace, TraceJob, parse_trace, trace_lines
from tests.vc.vc_builders import node, tasks

OWNER_2 = {"name": "a", "guaranteed": {"gpu": 2, "cpu": 8, "memoryMB": 64_000}}
RECLAIM_2 = {"virtualClusters": [OWNER_2, {"name": "b"}]}


def tj(name: str, at: float, duration: float, workers: int, elastic: tuple[int, int] | None = None, *,
       vc: str = "default") -> TraceJob:
    """A job of ``workers`` 1-GPU tasks; ``elastic=(min, max)`` in workers."""
    return TraceJob(name, at, duration, tasks(1, workers), vc=vc, user="u",
                    elastic=(ElasticRole("main", *elastic),) if elastic else ())


def interval(seconds: float, doc: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**(doc or {}), "scheduler": {"elastic": {"resizeIntervalSeconds": seconds}}}


@dataclass
class Case:
    """Each job's (first start, completion, preemptions), elastic and rigid, and the elastic run's resizes."""

    name: str
    jobs: list[TraceJob]
    elastic: dict[str, tuple[float | None, float | None, int]]
    rigid: dict[str, tuple[float | None, float | None, int]]
    resizes: dict[str, int] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)


# One node of 4 GPUs; a full pass every 10 s (growth waits for one), a grace period of 10 s.
CASES = [
    Case("alone, it grows into the idle GPUs at the next pass and finishes as fast as its size: 10 s at 2 of 2, "
         "then 90 s of work at 4 of 2 (twice as fast)",
         [tj("e", 0, 100, 2, (1, 4))], {"e": (0, 55, 0)}, {"e": (0, 100, 0)}, {"idle-capacity": 1}),
    Case("growth stops at the maximum: 90 s of work at 3 of 2",
         [tj("e", 0, 100, 2, (1, 3))], {"e": (0, 70, 0)}, {"e": (0, 100, 0)}, {"idle-capacity": 1}),
    Case("reclaim shrinks the borrower to what it asked (the highest indices go, after the grace period) instead "
         "of preempting it: 50 s of work done by 30, the rest at 2 of 2",
         [tj("e", 0, 100, 2, (1, 4), vc="b"), tj("owner", 30, 50, 2, vc="a")],
         {"e": (0, 80, 0), "owner": (40, 90, 0)}, {"e": (0, 100, 0), "owner": (30, 80, 0)},
         {"idle-capacity": 1, "reclaim": 1}, RECLAIM_2),
    Case("started at its minimum when its asked size does not fit, it runs at half speed (rigid, it waits)",
         [tj("big", 0, 1000, 3), tj("e", 1, 100, 2, (1, 2))],
         {"big": (0, 1000, 0), "e": (1, 201, 0)}, {"big": (0, 1000, 0), "e": (1000, 1100, 0)}),
    Case("hysteresis: shrunk at 30, it grows back no sooner than resizeIntervalSeconds (60) after, at the owner's "
         "exit at 90: 150 s of work left at 30, 90 at 90, then twice as fast",
         [tj("e", 0, 200, 2, (1, 4), vc="b"), tj("owner", 30, 50, 2, vc="a")],
         {"e": (0, 135, 0), "owner": (40, 90, 0)}, {"e": (0, 200, 0), "owner": (30, 80, 0)},
         {"idle-capacity": 2, "reclaim": 1}, interval(60, RECLAIM_2)),
    Case("a longer interval (120) keeps it at 2 until 150: 30 s of work left then",
         [tj("e", 0, 200, 2, (1, 4), vc="b"), tj("owner", 30, 50, 2, vc="a")],
         {"e": (0, 165, 0), "owner": (40, 90, 0)}, {"e": (0, 200, 0), "owner": (30, 80, 0)},
         {"idle-capacity": 2, "reclaim": 1}, interval(120, RECLAIM_2)),
]


def setup(case: Case) -> Setup:
    return Setup(nodes=(node("n1", gpu=4),), jobs=tuple(case.jobs), config=parse_config(case.config),
                 full_pass_seconds=10, grace_seconds=10)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_elastic_against_rigid(case: Case) -> None:
    for want, s in ((case.elastic, setup(case)), (case.rigid, rigid(setup(case)))):
        log = replay(s)
        got = {j.key: (j.started_at, j.completed_at, j.preemptions) for j in log.jobs}
        assert got == want
    elastic = replay(setup(case))
    assert elastic.resizes == case.resizes
    assert sum(j.resizes for j in elastic.jobs) == sum(case.resizes.values())
    assert report(elastic).resizes == case.resizes


def test_the_gpu_time_follows_the_size_and_a_shrunk_task_holds_its_gpu_for_the_grace_period() -> None:
    log = replay(setup(CASES[2]))
    # e: 2 GPUs 0-10, 4 GPUs 10-30, 2 GPUs 30-80, and the 2 removed until 40; the owner 2 GPUs 40-90
    assert log.gpu_seconds == 2 * 10 + 4 * 20 + 2 * 50 + 2 * 10 + 2 * 50
    assert log.lost_gpu_seconds == 0


def test_preempted_whole_below_its_minimum_it_loses_its_work_like_any_job() -> None:
    # e cannot give back 4 GPUs by shrinking (its minimum is 2 of them): it is preempted whole at 30, exits at 40
    # holding 4 GPUs since 10 (all of it lost), waits for the owner (40-90) and restarts at 90 from scratch
    config = {"virtualClusters": [{"name": "a", "guaranteed": {"gpu": 4, "cpu": 16, "memoryMB": 128_000}},
                                  {"name": "b"}]}
    s = Setup(nodes=(node("n1", gpu=4),), jobs=(tj("e", 0, 100, 2, (2, 4), vc="b"), tj("owner", 30, 50, 4, vc="a")),
              config=parse_config(config), full_pass_seconds=10, grace_seconds=10)
    log = replay(s)
    jobs = {j.key: j for j in log.jobs}
    assert (jobs["owner"].started_at, jobs["owner"].completed_at) == (40, 90)
    assert jobs["e"].preemptions == 1 and log.preemptions == 1
    assert log.lost_gpu_seconds == 2 * 10 + 4 * 30
    assert jobs["e"].completed_at == 90 + 55  # from scratch: 10 s at 2, then 90 s of work at 4


def test_rigid_strips_elastic_and_takes_the_same_path() -> None:
    s = setup(CASES[0])
    assert is_elastic(s) and not is_elastic(rigid(s))
    assert rigid(s).snapshot_passes and not s.snapshot_passes
    assert [j.tasks for j in rigid(s).jobs] == [j.tasks for j in s.jobs]


def test_an_elastic_trace_reads_back_the_same() -> None:
    jobs = (tj("e", 0, 100, 2, (1, 4)), tj("r", 5, 10, 1))
    read = parse_trace(list(trace_lines(Trace(jobs, (node("n1", gpu=4),)))))
    assert read.jobs == jobs


def line(**extra: Any) -> str:
    return json.dumps({"name": "j", "duration": 10, "tasks": [{"instances": 2, "gpu": 1}], **extra})


@pytest.mark.parametrize(("elastic", "field", "message"), [
    ([1, 2], "line 1.elastic", "expected a mapping of role to {minInstances, maxInstances}"),
    ({"worker": {"minInstances": 1, "maxInstances": 2}}, "line 1.elastic.worker", "names no task role (roles: main)"),
    ({"main": {"minInstances": 1}}, "line 1.elastic.main", "expected {minInstances, maxInstances} and nothing else"),
    ({"main": {"minInstances": 1, "maxInstances": 2, "step": 1}}, "line 1.elastic.main", "and nothing else"),
    ({"main": {"minInstances": 0, "maxInstances": 2}}, "line 1.elastic.main.minInstances",
     "expected an integer, at least 1"),
    ({"main": {"minInstances": 1, "maxInstances": 2.5}}, "line 1.elastic.main.maxInstances",
     "expected an integer, at least 1"),
    ({"main": {"minInstances": 3, "maxInstances": 2}}, "line 1.elastic.main",
     "minInstances 3 is greater than maxInstances 2"),
    ({"main": {"minInstances": 3, "maxInstances": 4}}, "line 1.elastic.main.minInstances",
     "3 is greater than instances 2 (minInstances <= instances <= maxInstances)"),
    ({"main": {"minInstances": 1, "maxInstances": 1}}, "line 1.elastic.main.maxInstances",
     "1 is less than instances 2 (minInstances <= instances <= maxInstances)"),
])
def test_a_bad_elastic_names_the_line_and_the_field(elastic: Any, field: str, message: str) -> None:
    with pytest.raises(InvalidParametersError) as e:
        parse_trace([line(elastic=elastic)])
    assert e.value.field == field
    assert message in e.value.message


def test_a_null_elastic_is_rigid() -> None:
    assert parse_trace([line(elastic=None)]).jobs[0].elastic == ()
    assert parse_trace([line()]).jobs[0].elastic == ()
