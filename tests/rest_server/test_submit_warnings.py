"""What a submitted job asks for and this cluster does not honour: in the 202 answer and in the job's events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.rest_server.conftest import AGENT_TOKEN, Api

PLUGIN_AND_INFINIBAND = """
protocolVersion: 2
name: warned
type: job
prerequisites:
  - {type: dockerimage, name: img, uri: busybox}
taskRoles:
  worker:
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    extraContainerOptions: {infiniband: true}
    commands: ["true"]
extras:
  com.microsoft.pai.runtimeplugin:
    - {plugin: tensorboard, parameters: {port: 6006}}
"""
V1_NO_GANG = json.dumps({"jobName": "nogang", "image": "busybox", "extras": {"gangAllocation": False},
                         "taskRoles": [{"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256,
                                        "gpuNumber": 0, "command": "true"}]})
V1_AUTH_FILE = V1_NO_GANG.replace('"image"', '"authFile": "hdfs://nn/auth", "image"')
CASES = [
    # (name, path, body, content type, job, fields warned about)
    ("v2 YAML", "/api/v2/jobs", PLUGIN_AND_INFINIBAND, "text/yaml", "admin~warned",
     ["taskRoles.worker.extraContainerOptions.infiniband", "extras.com.microsoft.pai.runtimeplugin[0].plugin"]),
    ("v1 on OpenPAI's v1 path", "/api/v1/user/admin/jobs", V1_AUTH_FILE, "application/json", "admin~nogang",
     ["authFile"]),  # gangAllocation: false is honoured, not warned about
]


@pytest.mark.parametrize(("name", "path", "body", "ctype", "key", "fields"), CASES, ids=[c[0] for c in CASES])
async def test_warnings_are_answered_and_recorded(api: Api, name: str, path: str, body: str, ctype: str, key: str,
                                                  fields: list[str]) -> None:
    status, answer = await api.call("POST", path, body=body, content_type=ctype)
    assert status == 202, answer
    assert [w["field"] for w in answer["warnings"]] == fields
    assert all(w["message"] for w in answer["warnings"])
    status, detail = await api.call("GET", f"/api/v2/jobs/{key}")
    assert status == 200
    events: list[dict[str, Any]] = [e for e in detail["events"] if e["kind"] == "warning"]
    assert [e["message"] for e in events] == [f"{w['field']}: {w['message']}" for w in answer["warnings"]]


@pytest.mark.parametrize("gang", ["true", "false"])
async def test_a_job_with_nothing_unhonoured_has_an_empty_list(api: Api, gang: str) -> None:
    status, answer = await api.call("POST", "/api/v2/jobs", body=V1_NO_GANG.replace("false", gang),
                                    content_type="application/json")
    assert (status, answer["warnings"]) == (202, [])


BIG_GPU = PLUGIN_AND_INFINIBAND.replace("name: warned", "name: big").replace(
    "resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}", "resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 64}")
V1_BIG_MEMORY = V1_NO_GANG.replace('"memoryMB": 256', '"memoryMB": 999999')


async def _register(api: Api, name: str, gpu: int, cpu: int, memory_mb: int) -> None:
    reg = {"version": 1, "node": {"name": name, "address": "127.0.0.9",
                                  "resources": {"gpu": gpu, "cpu": cpu, "memoryMB": memory_mb}}}
    status, body = await api.call("POST", "/api/internal/agents/register", json_body=reg, token=AGENT_TOKEN)
    assert status == 200, body


@pytest.mark.parametrize(("path", "body", "ctype", "key", "warning"), [
    pytest.param("/api/v2/jobs", BIG_GPU, "text/yaml", "admin~big",
                 {"field": "taskRoles.worker.resourcePerInstance.gpu",
                  "message": "asks 64 GPUs per instance; the largest node, n2, has 8"}, id="v2 GPUs"),
    pytest.param("/api/v1/jobs", V1_BIG_MEMORY, "application/json", "admin~nogang",
                 {"field": "taskRoles[0].memoryMB",
                  "message": "asks 999999 MB of memory per instance; the largest node, n1, has 65536"}, id="v1 memory"),
])
async def test_what_no_node_could_ever_hold_is_accepted_with_a_warning(api: Api, path: str, body: str, ctype: str,
                                                                      key: str, warning: dict[str, str]) -> None:
    await _register(api, "n1", 0, 16, 65536)
    await _register(api, "n2", 8, 8, 32768)
    status, answer = await api.call("POST", path, body=body, content_type=ctype)
    assert status == 202, answer  # OpenPAI accepts it: it waits, NeverFits
    assert warning in answer["warnings"]
    status, detail = await api.call("GET", f"/api/v2/jobs/{key}")
    assert status == 200 and detail["jobStatus"]["state"] == "WAITING"
    events = [e["message"] for e in detail["events"] if e["kind"] == "warning"]
    assert f"{warning['field']}: {warning['message']}" in events


async def test_a_job_the_nodes_can_hold_has_no_such_warning(api: Api) -> None:
    await _register(api, "n1", 64, 128, 1 << 20)
    status, answer = await api.call("POST", "/api/v2/jobs", body=BIG_GPU, content_type="text/yaml")
    assert status == 202
    assert not [w for w in answer["warnings"] if w["field"].startswith("taskRoles.worker.resourcePerInstance")]
