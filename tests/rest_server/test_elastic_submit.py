"""``extras.elastic`` over REST (issue 31, the protocol's part): a bad range is a 400 with OpenPAI's
``{code, message}`` naming the field and the rule, and nothing stored; a good one is a 202 with no warning, whose
detail shows each elastic role's range and current size."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.rest_server.conftest import Api
from tests.rest_server.test_bad_input import total_jobs

V2 = """protocolVersion: 2
name: stretch
type: job
prerequisites:
  - {{type: dockerimage, name: img, uri: busybox}}
taskRoles:
  worker:
    instances: 4
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
    commands: ['true']
extras:
  elastic: {elastic}
{more}"""


def v2(elastic: str, more: str = "") -> str:
    return V2.format(elastic=elastic, more=more)


def v1(elastic: dict[str, Any]) -> str:
    return json.dumps({"jobName": "stretch", "image": "busybox", "extras": {"elastic": elastic},
                       "taskRoles": [{"name": "worker", "taskNumber": 4, "cpuNumber": 1, "memoryMB": 128,
                                      "gpuNumber": 0, "command": "true"}]})


RULE = "(minInstances <= instances <= maxInstances)"
BAD = [
    ("v2 unknown role", v2("{learner: {minInstances: 1, maxInstances: 2}}"), "text/yaml",
     "extras.elastic.learner: names no task role (roles: worker)"),
    ("v2 min above instances", v2("{worker: {minInstances: 5, maxInstances: 8}}"), "text/yaml",
     f"extras.elastic.worker.minInstances: 5 is greater than taskRoles.worker.instances 4 {RULE}"),
    ("v1 max below taskNumber", v1({"worker": {"minInstances": 1, "maxInstances": 3}}), "application/json",
     f"extras.elastic.worker.maxInstances: 3 is less than taskRoles[0].taskNumber 4 {RULE}"),
    ("v1 minInstances 0", v1({"worker": {"minInstances": 0, "maxInstances": 8}}), "application/json",
     "extras.elastic.worker.minInstances: 0 is less than the minimum of 1"),
    ("v2 unknown key", v2("{worker: {minInstances: 2, maxInstances: 8, step: 1}}"), "text/yaml",
     "extras.elastic.worker.step: additional property is not allowed"),
    ("v2 with gangAllocation false", v2("{worker: {minInstances: 2, maxInstances: 8}}", "  gangAllocation: false\n"),
     "text/yaml", "extras.elastic: not allowed with extras.gangAllocation: false (an elastic job is admitted as a"
     " gang at its minimum)"),
]


@pytest.mark.parametrize(("name", "body", "ctype", "message"), BAD, ids=[c[0] for c in BAD])
async def test_a_bad_elastic_range_is_a_400_and_nothing_is_stored(api: Api, name: str, body: str, ctype: str,
                                                                 message: str) -> None:
    status, answer = await api.call("POST", "/api/v2/jobs", body=body, content_type=ctype)
    line = 13 if ctype == "text/yaml" else 1  # where the v2 body writes extras.elastic; a v1 body is one line of JSON
    assert (status, answer) == (400, {"code": "InvalidProtocolError", "message": message, "line": line})
    assert await total_jobs(api) == 0


async def test_maxinstances_past_the_clusters_tasks_per_role_is_a_400(api: Api) -> None:
    await api.apply_config({"limits": {"tasksPerRole": 6}})
    status, answer = await api.call("POST", "/api/v2/jobs", body=v2("{worker: {minInstances: 2, maxInstances: 8}}"),
                                    content_type="text/yaml")
    assert (status, answer["message"]) == (400, "extras.elastic.worker.maxInstances: 8 is greater than the maximum"
                                                " of 6 (cluster limit tasksPerRole)")
    assert await total_jobs(api) == 0
    status, _ = await api.call("POST", "/api/v2/jobs", body=v2("{worker: {minInstances: 2, maxInstances: 6}}"),
                               content_type="text/yaml")
    assert status == 202


@pytest.mark.parametrize(("body", "ctype"), [
    pytest.param(v2("{worker: {minInstances: 2, maxInstances: 8}}"), "text/yaml", id="v2"),
    pytest.param(v1({"worker": {"minInstances": 2, "maxInstances": 8}}), "application/json", id="v1"),
])
async def test_a_good_elastic_job_is_accepted_and_its_detail_shows_its_range(api: Api, body: str, ctype: str) -> None:
    status, answer = await api.call("POST", "/api/v2/jobs", body=body, content_type=ctype)
    assert status == 202, answer
    assert answer.get("warnings", []) == []
    status, detail = await api.call("GET", "/api/v2/jobs/admin~stretch")
    assert status == 200
    worker = detail["taskRoles"]["worker"]
    assert len(worker["taskStatuses"]) == 4  # waiting: the size it asks for first (instances / taskNumber)
    assert worker["elastic"] == {"minInstances": 2, "maxInstances": 8, "current": 4}
    status, config = await api.call("GET", "/api/v2/jobs/admin~stretch/config")
    stored = yaml.safe_load(config) if isinstance(config, str) else config
    assert status == 200 and stored["extras"]["elastic"] == {"worker": {"minInstances": 2, "maxInstances": 8}}
