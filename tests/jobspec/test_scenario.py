"""What-if scenarios for ``pai vc simulate`` are validated before a pass: a wrong file names what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pai.domain.errors import InvalidParametersError
from pai.jobspec.vcconfig import validate_scenario
from tests.vc.test_simulate import doc_block

ROOT = Path(__file__).resolve().parents[2]
NODE = {"name": "n1", "gpu": 8, "cpu": 32, "memoryMB": 65536}


def test_the_documented_scenario_is_valid() -> None:
    scenario = yaml.safe_load(doc_block("### Example scenario"))
    assert validate_scenario(scenario) == scenario


@pytest.mark.parametrize(
    ("scenario", "field", "rule"),
    [
        pytest.param({}, "nodes", "is required", id="empty-mapping"),
        pytest.param(yaml.safe_load((ROOT / "examples" / "hello-v2.yaml").read_text()), "protocolVersion",
                     "additional property is not allowed", id="a-job-spec"),
        pytest.param({"nodes": []}, "nodes", "must have at least 1 item", id="no-nodes"),
        pytest.param({"nodes": [{"gpu": 8}]}, "nodes[0].name", "is required", id="node-without-name"),
        pytest.param({"nodes": [NODE], "pending": [{"name": "j", "tasks": [{"gpu": -1}]}]},
                     "pending[0].tasks[0].gpu", "less than the minimum of 0", id="negative-gpu"),
        pytest.param({"nodes": [NODE], "pending": [{"name": "j", "tasks": [{"gpus": 1}]}]},
                     "pending[0].tasks[0].gpus", "additional property is not allowed", id="misspelt-field"),
        pytest.param({"nodes": [NODE], "running": [{"name": "r", "tasks": [{"gpu": 1}]}]},
                     "running[0].tasks[0].node", "is required", id="running-task-without-node"),
        pytest.param({"nodes": [NODE], "vcs": [{"name": "a", "guaranteed": {"gpu": "lots"}}]},
                     "vcs[0].guaranteed.gpu", "", id="vc-checked-as-in-the-configuration"),
        pytest.param({"nodes": [NODE], "priorityClasses": {"urgent": "high"}}, "priorityClasses.urgent",
                     "is not of type integer", id="priority-class-not-a-number"),
        pytest.param({"nodes": [NODE], "running": [{"name": "r", "preemptible": "no", "tasks": [{"node": "n1"}]}]},
                     "running[0].preemptible", "is not of type boolean", id="preemptible-not-a-boolean"),
        pytest.param({"nodes": [NODE], "pending": [{"name": "j", "elastic": {"main": {"minInstances": 0,
                                                                                  "maxInstances": 2}},
                                                  "tasks": [{"gpu": 1}]}]},
                     "pending[0].elastic.main.minInstances", "less than the minimum of 1", id="elastic-min-0"),
        pytest.param({"nodes": [NODE], "running": [{"name": "r", "elastic": {"main": {"maxInstances": 2}},
                                                  "tasks": [{"node": "n1"}]}]},
                     "running[0].elastic.main.minInstances", "is required", id="elastic-without-min"),
    ],
)
def test_invalid_scenarios_name_the_field_and_the_rule(scenario: dict[str, Any], field: str, rule: str) -> None:
    with pytest.raises(InvalidParametersError) as info:
        validate_scenario(scenario)
    assert info.value.field == field
    assert info.value.message.startswith(f"{field}: ") and rule in info.value.message
