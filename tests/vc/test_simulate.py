"""The what-if simulator: a scenario as plain data in, one pass's outcome out."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pai.domain.errors import InvalidParametersError
from pai.vc.simulate import scenario_snapshot, simulate

DOCS = Path(__file__).resolve().parents[2] / "docs" / "scheduling.md"


def doc_block(title: str) -> str:
    """The first ```yaml block after the heading ``title`` in docs/scheduling.md."""
    text = DOCS.read_text()
    start = text.index(title)
    match = re.search(r"```yaml\n(.*?)```", text[start:], re.S)
    assert match, title
    return match.group(1)


def test_the_documented_scenario_gives_the_documented_result() -> None:
    scenario = yaml.safe_load(doc_block("### Example scenario"))
    expected = yaml.safe_load(doc_block("### Its result"))
    got = simulate(scenario)
    assert got["admitted"] == expected["admitted"]
    assert got["preempted"] == expected["preempted"]
    assert {k: (r["code"], r["message"]) for k, r in got["waiting"].items()} == {
        k: (r["code"], r["message"]) for k, r in expected["waiting"].items()}


def node(name: str, gpu: int = 8) -> dict[str, Any]:
    return {"name": name, "gpu": gpu, "cpu": 32, "memoryMB": 256_000}


CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("a job that fits is admitted with its placement",
     {"nodes": [node("n1")], "pending": [{"name": "j", "tasks": [{"gpu": 2, "instances": 2}]}]},
     {"admitted": {"j": {"main-0": "n1", "main-1": "n1"}}, "preempted": [], "waiting": {}}),
    ("a job waiting for its victims counts as admitted; victims are listed",
     {"nodes": [node("n1")], "vcs": [{"name": "a", "guaranteed": {"gpu": 8}}, {"name": "b"}],
      "running": [{"name": "r", "vc": "b", "startedAt": 1, "tasks": [{"gpu": 8, "node": "n1"}]}],
      "pending": [{"name": "j", "vc": "a", "submittedAt": 2, "tasks": [{"gpu": 8}]}]},
     {"admitted": {"j": {"main-0": "n1"}}, "preempted": ["r"], "waiting": {}}),
    ("left-out resources: 0 for jobs and guarantees, unlimited max",
     {"nodes": [node("n1")], "vcs": [{"name": "a", "max": {"gpu": 4}}],
      "pending": [{"name": "j", "vc": "a", "tasks": [{"gpu": 4}]}, {"name": "k", "vc": "a", "submittedAt": 1,
                                                                     "tasks": [{"gpu": 1}]}]},
     {"admitted": {"j": {"main-0": "n1"}}, "preempted": [], "waiting": {"k": "VcAtMax"}}),
    ("priority class names and integers",
     {"nodes": [node("n1", 4)],
      "pending": [{"name": "low", "priority": "oppo", "tasks": [{"gpu": 4}]},
                  {"name": "high", "priority": "prod", "submittedAt": 5, "tasks": [{"gpu": 4}]}]},
     {"admitted": {"high": {"main-0": "n1"}}, "preempted": [], "waiting": {"low": "NoNodeFits"}}),
    ("admin-defined priority classes",
     {"nodes": [node("n1", 4)], "priorityClasses": {"urgent": 1000},
      "pending": [{"name": "p", "priority": "prod", "tasks": [{"gpu": 4}]},
                  {"name": "u", "priority": "urgent", "submittedAt": 5, "tasks": [{"gpu": 4}]}]},
     {"admitted": {"u": {"main-0": "n1"}}, "preempted": [], "waiting": {"p": "NoNodeFits"}}),
    ("a non-preemptible running job is not preempted; the job that needs its GPUs waits",
     {"nodes": [node("n1")],
      "running": [{"name": "svc", "preemptible": False, "startedAt": 1, "tasks": [{"gpu": 1, "node": "n1"}]}],
      "pending": [{"name": "big", "priority": "prod", "submittedAt": 2, "tasks": [{"gpu": 8}]},
                  {"name": "small", "submittedAt": 3, "tasks": [{"gpu": 4}]}]},
     {"admitted": {"small": {"main-0": "n1"}}, "preempted": [], "waiting": {"big": "HeldByNonPreemptible"}}),
    ("running jobs are preemptible unless they say otherwise",
     {"nodes": [node("n1")], "running": [{"name": "r", "startedAt": 1, "tasks": [{"gpu": 8, "node": "n1"}]}],
      "pending": [{"name": "big", "priority": "prod", "submittedAt": 2, "tasks": [{"gpu": 8}]}]},
     {"admitted": {"big": {"main-0": "n1"}}, "preempted": ["r"], "waiting": {}}),
    ("named roles and node labels; the CPU-only task packs beside the GPU task",
     {"nodes": [node("n1"), {**node("n2"), "labels": {"ib": "yes"}}],
      "pending": [{"name": "j", "tasks": [{"role": "ps", "cpu": 1}, {"role": "worker", "gpu": 8,
                                                                      "nodeSelector": {"ib": "yes"}}]}]},
     {"admitted": {"j": {"ps-0": "n2", "worker-0": "n2"}}, "preempted": [], "waiting": {}}),
]


@pytest.mark.parametrize(("name", "scenario", "expected"), CASES, ids=[c[0] for c in CASES])
def test_simulate(name: str, scenario: dict[str, Any], expected: dict[str, Any]) -> None:
    got = simulate(scenario)
    assert got["admitted"] == expected["admitted"]
    assert got["preempted"] == expected["preempted"]
    assert {k: r["code"] for k, r in got["waiting"].items()} == expected["waiting"]


def test_now_defaults_to_the_latest_time_in_the_scenario() -> None:
    s = {"nodes": [node("n1")], "running": [{"name": "r", "startedAt": 40, "tasks": [{"gpu": 1, "node": "n1"}]}],
         "pending": [{"name": "j", "submittedAt": 70, "tasks": [{"gpu": 1}]}]}
    assert scenario_snapshot(s).now == 70
    assert scenario_snapshot({**s, "now": 500}).now == 500
    assert scenario_snapshot({"nodes": [node("n1")]}).now == 0


@pytest.mark.parametrize(("scenario", "message"), [
    ({"nodes": [{"gpu": 8}]}, "nodes[0]: missing 'name'"),
    ({"nodes": [node("n1")], "running": [{"name": "r", "tasks": [{"gpu": 1}]}]}, "running[0].tasks: missing 'node'"),
    ({"nodes": [node("n1")], "running": [{"name": "r", "tasks": [{"gpu": 1, "node": "n9"}]}]}, "unknown nodes: n9"),
    ({"nodes": [node("n1")], "pending": [{"name": "j", "tasks": []}]}, "needs at least one task"),
    ({"nodes": [node("n1")], "pending": [{"name": "j", "priority": "urgent", "tasks": [{"gpu": 1}]}]},
     "unknown priority class 'urgent'"),
    ({"nodes": [node("n1")], "vcs": [{"name": "a", "guaranteed": {"gpu": 9}}]}, "guarantees sum to 9 GPU"),
    ({"nodes": [node("n1")], "vcs": [{"name": "a", "preemption": {"reclaim": "Sometimes"}}]}, "invalid scenario"),
    ({"nodes": "n1"}, "nodes: expected a list of mappings"),
])
def test_invalid_scenarios_name_the_problem(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParametersError) as err:
        simulate(scenario)
    assert message in err.value.message


ELASTIC_RUNNING = {"name": "e", "startedAt": 0, "elastic": {"main": {"minInstances": 1, "maxInstances": 4}},
                   "tasks": [{"gpu": 1, "instances": 2, "node": "n1"}]}


def test_a_running_elastic_job_grows_into_idle_gpus_and_the_result_says_so() -> None:
    got = simulate({"nodes": [node("n1", 4)], "now": 100, "running": [ELASTIC_RUNNING]})
    assert got["resized"] == [{"job": "e", "role": "main", "from": 2, "to": 4, "cause": "idle-capacity",
                               "message": "grew to 4: 2 GPUs idle in VC `default`",
                               "added": {"main-2": "n1", "main-3": "n1"}}]


def test_a_recent_resize_holds_growth_for_the_interval() -> None:
    s = {"nodes": [node("n1", 4)], "now": 100, "running": [{**ELASTIC_RUNNING, "lastResizedAt": 90}],
         "scheduler": {"elastic": {"resizeIntervalSeconds": 60}}}
    assert simulate(s)["resized"] == []
    assert simulate({**s, "now": 150})["resized"][0]["to"] == 4


def test_an_elastic_job_shrinks_on_reclaim_the_highest_indices_first() -> None:
    got = simulate({"nodes": [node("n1", 4)], "vcs": [{"name": "a", "guaranteed": {"gpu": 2}}, {"name": "b"}],
                    "running": [{**ELASTIC_RUNNING, "vc": "b", "tasks": [{"gpu": 1, "instances": 4, "node": "n1"}]}],
                    "pending": [{"name": "owner", "vc": "a", "submittedAt": 5, "tasks": [{"gpu": 2}]}]})
    assert got["preempted"] == []
    (z,) = got["resized"]
    assert (z["job"], z["from"], z["to"], z["cause"], z["removed"]) == ("e", 4, 2, "reclaim", ["main-3", "main-2"])


@pytest.mark.parametrize(("job", "field", "message"), [
    ({"name": "j", "elastic": {"ps": {"minInstances": 1, "maxInstances": 2}}, "tasks": [{"gpu": 1}]},
     "pending[0].elastic.ps", "names no task role (roles: main)"),
    ({"name": "j", "elastic": {"main": {"minInstances": 2, "maxInstances": 4}}, "tasks": [{"gpu": 1}]},
     "pending[0].elastic.main.minInstances", "2 is greater than instances 1"),
])
def test_a_bad_elastic_names_the_field(job: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InvalidParametersError) as err:
        simulate({"nodes": [node("n1")], "pending": [job]})
    assert err.value.field == field and message in err.value.message
