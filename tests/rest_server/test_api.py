"""The REST API in process (real app, real database): OpenPAI's shapes and error codes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import yaml

from pai.store import users
from tests.rest_server.conftest import AGENT_TOKEN, Api

HELLO_V1 = {
    "jobName": "hello",
    "image": "busybox",
    "taskRoles": [{"name": "worker", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
                   "command": "echo hi"}],
}
HELLO_V2 = """
protocolVersion: 2
name: hello2
type: job
prerequisites:
  - {type: dockerimage, name: img, uri: busybox}
secrets:
  key: s3cret
taskRoles:
  worker:
    instances: 2
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: ["echo <% $secrets.key %>"]
"""


def v1(**changes: Any) -> str:
    return json.dumps({**HELLO_V1, **changes})


def role(**changes: Any) -> dict[str, Any]:
    return {**HELLO_V1["taskRoles"][0], **changes}  # type: ignore[dict-item]


async def total_jobs(api: Api) -> int:
    status, body = await api.call("GET", "/api/v2/jobs?withTotalCount=true")
    assert status == 200
    return int(body["totalCount"])


async def test_info_endpoints_need_no_token(api: Api) -> None:
    for path in ("/api/v1", "/api/v2/info", "/healthz"):
        status, body = await api.call("GET", path, token="")
        assert status == 200 and isinstance(body, dict), path


async def test_login_gives_token_user_and_admin(api: Api) -> None:
    status, body = await api.call("POST", "/api/v1/authn/basic/login",
                                  json_body={"username": "admin", "password": "admin-password"})
    assert status == 200
    assert body["user"] == "admin" and body["admin"] is True and len(body["token"]) > 20


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"username": "admin", "password": "wrong"}, 400, "IncorrectPasswordError"),
    ({"username": "nobody", "password": "x"}, 400, "NoUserError"),
    ({"username": "admin"}, 400, "InvalidParametersError"),
])
async def test_bad_logins(api: Api, body: dict[str, str], status: int, code: str) -> None:
    got, resp = await api.call("POST", "/api/v2/authn/basic/login", json_body=body)
    assert (got, resp["code"]) == (status, code)
    assert resp["message"]


@pytest.mark.parametrize("token", ["", "not-a-token"])
async def test_jobs_need_a_valid_token(api: Api, token: str) -> None:
    api.token = None
    status, body = await api.call("GET", "/api/v2/jobs", token=token or None)
    assert status == 401 and body["code"] == "UnauthorizedUserError"


INVALID = [
    ("no task roles", v1(taskRoles=[]), "application/json", "taskRoles"),
    ("bad job name", v1(jobName="bad name!"), "application/json", "jobName"),
    ("negative gpuNumber", v1(taskRoles=[role(gpuNumber=-1)]), "application/json", "taskRoles[0].gpuNumber"),
    ("unknown field", v1(colour="blue"), "application/json", "colour"),
    ("wrong type", v1(taskRoles=[role(taskNumber="two")]), "application/json", "taskRoles[0].taskNumber"),
    ("malformed JSON", '{"jobName": "x", ', "application/json", "JSON"),
    ("malformed YAML", "protocolVersion: 2\nname: [unclosed\n", "text/yaml", "YAML"),
    ("v2 without task roles", "protocolVersion: 2\nname: x\ntype: job\nprerequisites: []\n", "text/yaml",
     "taskRoles"),
]


@pytest.mark.parametrize(("name", "body", "ctype", "field"), INVALID, ids=[c[0] for c in INVALID])
async def test_invalid_specs_are_400_naming_the_field_and_store_nothing(
    api: Api, name: str, body: str, ctype: str, field: str
) -> None:
    status, resp = await api.call("POST", "/api/v2/jobs", body=body, content_type=ctype)
    assert status == 400, resp
    assert resp["code"] == "InvalidProtocolError"
    assert field in resp["message"]
    assert "Traceback" not in resp["message"]
    assert await total_jobs(api) == 0


async def test_submit_detail_and_conflict(api: Api) -> None:
    status, body = await api.call("POST", "/api/v2/jobs", body=v1(), content_type="application/json")
    assert status == 202 and body["jobName"] == "admin~hello"
    status, body = await api.call("POST", "/api/v2/jobs", body=v1(), content_type="application/json")
    assert status == 409 and body["code"] == "ConflictJobError" and "admin~hello" in body["message"]
    assert await total_jobs(api) == 1
    status, detail = await api.call("GET", "/api/v2/jobs/admin~hello")
    assert status == 200
    assert detail["name"] == "hello"
    assert detail["jobStatus"]["state"] == "WAITING"
    assert detail["jobStatus"]["username"] == "admin"
    statuses = detail["taskRoles"]["worker"]["taskStatuses"]
    assert [t["taskIndex"] for t in statuses] == [0, 1]
    assert {t["taskState"] for t in statuses} == {"WAITING"}
    assert detail["events"][0]["kind"] == "submitted"


async def test_v1_user_path_submits_as_that_user_only(api: Api) -> None:
    status, _ = await api.call("POST", "/api/v1/user/admin/jobs", body=v1(jobName="viav1"),
                               content_type="application/json")
    assert status == 202
    status, body = await api.call("POST", "/api/v1/user/someoneelse/jobs", body=v1(jobName="x"),
                                  content_type="application/json")
    assert status == 403 and body["code"] == "ForbiddenUserError"


async def test_v2_config_is_returned_as_yaml_with_secrets_masked(api: Api) -> None:
    status, _ = await api.call("POST", "/api/v2/jobs", body=HELLO_V2, content_type="text/yaml")
    assert status == 202
    status, text = await api.call("GET", "/api/v2/jobs/admin~hello2/config")
    assert status == 200
    config = yaml.safe_load(text)
    assert config["secrets"] == {"key": "******"}
    assert "s3cret" not in text


async def test_list_filters_and_summary_shape(api: Api) -> None:
    for name in ("alpha", "beta", "alphabet"):
        await api.call("POST", "/api/v2/jobs", body=v1(jobName=name), content_type="application/json")
    status, body = await api.call("GET", "/api/v2/jobs?keyword=alpha&order=asc")
    assert status == 200
    assert [j["name"] for j in body] == ["alpha", "alphabet"]
    assert body[0]["totalTaskNumber"] == 2 and body[0]["virtualCluster"] == "default"
    status, body = await api.call("GET", "/api/v2/jobs?limit=1&offset=1&withTotalCount=true&order=asc")
    assert body["totalCount"] == 3 and [j["name"] for j in body["data"]] == ["beta"]
    status, body = await api.call("GET", "/api/v2/jobs?state=RUNNING")
    assert body == []


@pytest.mark.parametrize("query", ["limit=-1", "offset=abc", "state=BOGUS", "order=sideways"])
async def test_bad_query_parameters(api: Api, query: str) -> None:
    status, body = await api.call("GET", f"/api/v2/jobs?{query}")
    assert status == 400 and body["code"] == "InvalidParametersError"


async def test_unknown_job_vc_and_route(api: Api) -> None:
    status, body = await api.call("GET", "/api/v2/jobs/admin~nope")
    assert status == 404 and body["code"] == "NoJobError"
    status, body = await api.call("POST", "/api/v2/jobs", body=v1(virtualCluster="nope"),
                                  content_type="application/json")
    assert status == 404 and body["code"] == "NoVirtualClusterError"
    assert await total_jobs(api) == 0
    status, body = await api.call("GET", "/api/v2/nothing-here")
    assert status == 404 and set(body) == {"code", "message"}


async def test_stop_waiting_job_and_permissions(api: Api) -> None:
    await api.call("POST", "/api/v2/jobs", body=v1(), content_type="application/json")
    await api.write(lambda s: users.create_user(s, "bob", "bob-password"))
    bob = await api.login("bob", "bob-password")
    status, body = await api.call("PUT", "/api/v2/jobs/admin~hello/executionType", json_body={"value": "STOP"},
                                  token=bob)
    assert status == 403 and body["code"] == "ForbiddenUserError"
    await api.login()
    status, body = await api.call("PUT", "/api/v2/jobs/admin~hello/executionType", json_body={"value": "BOGUS"})
    assert status == 400 and "value" in body["message"]
    status, body = await api.call("PUT", "/api/v2/jobs/admin~hello/executionType", json_body={"value": "STOP"})
    assert status == 202 and body["alreadyEnded"] is False
    status, detail = await api.call("GET", "/api/v2/jobs/admin~hello")
    assert detail["jobStatus"]["state"] == "STOPPED"
    assert detail["jobStatus"]["executionType"] == "STOP"


async def test_stopping_a_job_that_has_ended_says_so_and_changes_nothing(api: Api) -> None:
    await api.call("POST", "/api/v2/jobs", body=v1(), content_type="application/json")
    await api.call("PUT", "/api/v2/jobs/admin~hello/executionType", json_body={"value": "STOP"})
    status, before = await api.call("GET", "/api/v2/jobs/admin~hello")
    status, body = await api.call("PUT", "/api/v2/jobs/admin~hello/executionType", json_body={"value": "STOP"})
    assert status == 202  # as OpenPAI answers: stopping is idempotent
    assert body["alreadyEnded"] is True and body["jobState"] == "STOPPED"
    assert body["message"] == "job admin~hello has already ended (STOPPED): nothing to stop"
    status, after = await api.call("GET", "/api/v2/jobs/admin~hello")
    assert after == before


async def test_internal_endpoints_need_the_agent_token(api: Api) -> None:
    reg = {"version": 1, "node": {"name": "n1", "address": "127.0.0.9", "resources": {"gpu": 0, "cpu": 2,
                                                                                      "memoryMB": 1024}}}
    status, body = await api.call("POST", "/api/internal/agents/register", json_body=reg, token="wrong")
    assert status == 401
    status, body = await api.call("POST", "/api/internal/agents/n2/heartbeat",
                                  json_body={"version": 1, "node": "n2"}, token=AGENT_TOKEN)
    assert status == 404 and body["code"] == "NoNodeError"
    status, body = await api.call("POST", "/api/internal/agents/register", json_body={**reg, "version": 99},
                                  token=AGENT_TOKEN)
    assert status == 400 and "version" in body["message"]
    status, body = await api.call("POST", "/api/internal/agents/register", json_body=reg, token=AGENT_TOKEN)
    assert status == 200 and body["commands"] == []
    status, nodes = await api.call("GET", "/api/v2/nodes")
    assert [n["name"] for n in nodes] == ["n1"] and nodes[0]["total"]["cpu"] == 2


async def test_admitted_job_sends_start_commands_with_env(api: Api) -> None:
    reg = {"version": 1, "node": {"name": "n1", "address": "127.0.0.9", "resources": {"gpu": 0, "cpu": 4,
                                                                                      "memoryMB": 4096}}}
    await api.call("POST", "/api/internal/agents/register", json_body=reg, token=AGENT_TOKEN)
    await api.call("POST", "/api/v2/jobs", body=v1(), content_type="application/json")
    for _ in range(100):
        status, detail = await api.call("GET", "/api/v2/jobs/admin~hello")
        if detail["jobStatus"]["state"] == "RUNNING":
            break
        await asyncio.sleep(0.05)
    assert detail["jobStatus"]["state"] == "RUNNING"
    status, reply = await api.call("POST", "/api/internal/agents/n1/heartbeat",
                                   json_body={"version": 1, "node": "n1"}, token=AGENT_TOKEN)
    starts = [c for c in reply["commands"] if c["type"] == "start"]
    assert len(starts) == 2
    env = starts[0]["env"]
    assert env["PAI_JOB_NAME"] == "admin~hello"
    assert env["PAI_TASK_ROLE_worker_HOST_LIST"].count("127.0.0.9:") == 2
    # the agent reports both running, then one exits 0 and the other 0: the job succeeds
    reports = [{"attemptId": c["attemptId"], "jobKey": "admin~hello", "role": "worker", "index": c["index"],
                "status": "running"} for c in starts]
    status, reply = await api.call("POST", "/api/internal/agents/n1/heartbeat",
                                   json_body={"version": 1, "node": "n1", "containers": reports}, token=AGENT_TOKEN)
    assert reply["commands"] == []
    exited = [{**r, "status": "exited", "exitCode": 0} for r in reports]
    await api.call("POST", "/api/internal/agents/n1/heartbeat",
                   json_body={"version": 1, "node": "n1", "containers": exited}, token=AGENT_TOKEN)
    status, detail = await api.call("GET", "/api/v2/jobs/admin~hello")
    assert detail["jobStatus"]["state"] == "SUCCEEDED"
    status, attempts = await api.call("GET", "/api/v2/jobs/admin~hello/attempts")
    assert len(attempts) == 2 and {a["state"] for a in attempts} == {"SUCCEEDED"}
