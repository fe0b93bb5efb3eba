"""The REST calls OpenPAI's VS Code extension (microsoft/openpaivscode) makes, replayed as it makes them, and what
it does with each answer: healthz, protocol-version detection, a token asked for with a form, the pre-submit name
check, a v1 job posted as a form (``request``'s ``form:``, i.e. qs's bracket encoding), a v2 YAML job, the job
list and a job's detail."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from tests.rest_server.conftest import ADMIN_PASSWORD, Api

FORM = "application/x-www-form-urlencoded"
V1_JOB: dict[str, Any] = {
    "jobName": "vscode-v1", "image": "busybox", "virtualCluster": "default", "retryCount": 0,
    "taskRoles": [{"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
                   "command": "echo hello", "portList": [{"label": "http", "beginAt": 0, "portNumber": 1}]}],
    "jobEnvs": {"MODE": "debug"},
}
V2_JOB = """protocolVersion: 2
name: vscode-v2
type: job
prerequisites:
  - {type: dockerimage, name: img, uri: busybox}
taskRoles:
  main:
    instances: 1
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: [echo hello]
"""


def qs_stringify(value: Any, prefix: str = "") -> list[str]:
    """What ``qs.stringify`` (the ``request`` library's ``form:``) writes: ``a%5B0%5D%5Bb%5D=1``, keys and values
    percent-encoded, arrays by index, every value as text."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in qs_stringify(v, f"{prefix}[{k}]" if prefix else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in qs_stringify(v, f"{prefix}[{i}]")]
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return [f"{quote(prefix, safe='')}={quote(text, safe='')}"]


@pytest.mark.parametrize("base", [
    pytest.param("/rest-server", id="behind pylon: /healthz answers at the host, as pai's does"),
    pytest.param("", id="host:9186: when /healthz does not answer"),
])
async def test_the_extensions_calls_get_what_it_expects(api: Api, base: str) -> None:
    status, _ = await api.call("GET", "/healthz", token="")
    assert status == 200  # clusterManager.add: the cluster answers, so the API is at {host}/rest-server

    status, info = await api.call("GET", f"{base}/api/v2/info", token="")  # autoAddOIDCUserInfo
    assert status == 200 and info["authnMethod"] == "basic" and info["launcherType"] == "k8s"

    status, answer = await api.call("GET", f"{base}/api/v2/jobs/protocolversion/config", token="")
    assert answer["code"] != "NoApiError", answer  # anything else: protocol version 2 (NoApiError: v1 only)

    body = f"username=admin&password={ADMIN_PASSWORD}&expiration=4000"
    status, answer = await api.call("POST", f"{base}/api/v1/token", body=body, content_type=FORM, token="")
    assert status == 200 and answer["token"]
    token = answer["token"]

    status, answer = await api.call("GET", f"{base}/api/v1/user/admin/jobs/vscode-v1", token=token)
    assert (status, answer["code"]) == (404, "NoJobError")  # the name is free: the extension goes on

    form = "&".join(qs_stringify(V1_JOB))
    assert "taskRoles%5B0%5D%5BtaskNumber%5D=1" in form
    status, answer = await api.call("POST", f"{base}/api/v1/user/admin/jobs", body=form, content_type=FORM,
                                    token=token)
    assert status == 202, answer

    status, answer = await api.call("GET", f"{base}/api/v1/user/admin/jobs/vscode-v1", token=token)
    assert status == 200 and answer["name"] == "vscode-v1"  # now taken: the extension asks for another name
    status, config = await api.call("GET", f"{base}/api/v2/jobs/admin~vscode-v1/config", token=token)
    assert config["taskRoles"][0]["taskNumber"] == 1 and config["jobEnvs"] == {"MODE": "debug"}  # numbers again

    status, answer = await api.call("POST", f"{base}/api/v2/jobs", body=V2_JOB, content_type="text/yaml",
                                    token=token)
    assert status == 202, answer

    status, listed = await api.call("GET", f"{base}/api/v2/jobs", token=token)
    assert sorted(j["name"] for j in listed) == ["vscode-v1", "vscode-v2"]
    status, detail = await api.call("GET", f"{base}/api/v2/jobs/admin~vscode-v2", token=token)
    assert status == 200 and detail["jobStatus"]["username"] == "admin"
    assert list(detail["taskRoles"]) == ["main"]


async def test_under_rest_server_only_the_api_answers_as_itself(api: Api) -> None:
    status, answer = await api.call("GET", "/rest-server/api/v2/nothing")
    assert (status, answer["code"]) == (404, "NoApiError")  # as /api/v2/nothing
    status, answer = await api.call("GET", "/rest-server/api/v2/users/")
    assert status == 200 and [u["username"] for u in answer] == ["admin"]  # a trailing slash too
    status, _ = await api.call("GET", "/rest-server/api/v2/users", token="not-a-token")
    assert status == 401
    for path in ("/rest-server/", "/rest-server/healthz", "/rest-server/api/internal/agents/register"):
        status, _ = await api.call("GET", path)
        assert status in (404, 405), path  # the dashboard, the monitors and the agents' door are not under it


async def test_a_bad_form_job_is_refused_naming_the_field(api: Api) -> None:
    job = {**V1_JOB, "taskRoles": [{**V1_JOB["taskRoles"][0], "taskNumber": "many"}]}
    status, answer = await api.call("POST", "/api/v1/user/admin/jobs", body="&".join(qs_stringify(job)),
                                    content_type=FORM)
    assert (status, answer["code"]) == (400, "InvalidProtocolError") and "taskRoles[0].taskNumber" in answer["message"]
    status, listed = await api.call("GET", "/api/v2/jobs")
    assert listed == []


async def test_the_v014_job_family(api: Api) -> None:
    await api.call("POST", "/api/v2/jobs", body=V2_JOB, content_type="text/yaml")
    for path in ("/api/v1/jobs", "/api/v1/user/admin/jobs", "/api/v1/jobs/", "/api/v1/user/admin/jobs/"):
        status, listed = await api.call("GET", path)
        assert status == 200 and [j["name"] for j in listed] == ["vscode-v2"], path
    status, listed = await api.call("GET", "/api/v1/user/nobody/jobs")
    assert (status, listed) == (200, [])
    status, detail = await api.call("GET", "/api/v1/jobs/admin~vscode-v2")
    assert status == 200 and detail["name"] == "vscode-v2"
    status, config = await api.call("GET", "/api/v1/user/admin/jobs/vscode-v2/config")
    assert status == 200 and "vscode-v2" in str(config)
    status, answer = await api.call("PUT", "/api/v1/user/admin/jobs/vscode-v2/executionType",
                                    json_body={"value": "STOP"})
    assert status == 202, answer
    status, detail = await api.call("GET", "/api/v1/user/admin/jobs/vscode-v2")
    assert detail["jobStatus"]["state"] == "STOPPED"


async def test_v014_submissions_by_post_and_by_put_with_the_name_in_the_path(api: Api) -> None:
    job = {**V1_JOB, "jobName": "old-a"}
    status, answer = await api.call("POST", "/api/v1/jobs", json_body=job)
    assert status == 202, answer
    status, answer = await api.call("PUT", "/api/v1/user/admin/jobs/old-b", json_body={**job, "jobName": "old-b"})
    assert status == 202, answer
    status, answer = await api.call("PUT", "/api/v1/jobs/old-c", json_body={**job, "jobName": "old-c"})
    assert status == 202, answer
    status, answer = await api.call("PUT", "/api/v1/jobs/old-d", json_body={**job, "jobName": "other"})
    assert (status, answer) == (400, {"code": "InvalidParametersError",
                                      "message": "jobName: the body names 'other', the path 'old-d'"})
    status, answer = await api.call("PUT", "/api/v1/user/bob/jobs/old-e", json_body={**job, "jobName": "old-e"})
    assert (status, answer["code"]) == (403, "ForbiddenUserError")
    status, answer = await api.call("PUT", "/api/v1/jobs/old-b", json_body={**job, "jobName": "old-b"})
    assert (status, answer["code"]) == (409, "ConflictJobError")
    _, listed = await api.call("GET", "/api/v1/jobs?order=jobName,ASC")
    assert [j["name"] for j in listed] == ["old-a", "old-b", "old-c"]


async def test_a_form_that_is_not_one_is_a_400(api: Api) -> None:
    for path in ("/api/v1/user/admin/jobs", "/api/v2/authn/basic/login"):
        status, answer = await api.call("POST", path, body="x", content_type="multipart/form-data")
        assert (status, answer["code"]) == (400, "InvalidParametersError") and "boundary" in answer["message"], path
    assert (await api.call("GET", "/api/v2/jobs"))[1] == []


async def test_v014_delete_frees_the_name_of_an_ended_job(api: Api) -> None:
    job = {**V1_JOB, "jobName": "old-keyword-a"}
    await api.call("POST", "/api/v1/jobs", json_body=job)
    await api.call("PUT", "/api/v2/jobs/admin~old-keyword-a/tag", json_body={"value": "t"})
    status, answer = await api.call("DELETE", "/api/v1/user/admin/jobs/old-keyword-a")
    assert (status, answer["code"]) == (409, "ConflictJobError") and "stop it first" in answer["message"]
    await api.call("PUT", "/api/v2/jobs/admin~old-keyword-a/executionType", json_body={"value": "STOP"})
    status, answer = await api.call("DELETE", "/api/v1/user/admin/jobs/old-keyword-a")
    assert (status, answer) == (202, {"message": "deleted job admin~old-keyword-a successfully"})
    status, answer = await api.call("GET", "/api/v2/jobs/admin~old-keyword-a")
    assert (status, answer["code"]) == (404, "NoJobError")
    _, listed = await api.call("GET", "/api/v2/jobs?keyword=keyword&withTotalCount=true")
    assert listed == {"totalCount": 0, "data": []}
    status, _ = await api.call("POST", "/api/v1/jobs", json_body=job)  # the name is free again
    assert status == 202
    _, listed = await api.call("GET", "/api/v2/jobs?keyword=keyword")
    assert [(j["name"], j["tags"]) for j in listed] == [("old-keyword-a", [])]
    status, answer = await api.call("DELETE", "/api/v1/jobs/admin~nothing")
    assert (status, answer["code"]) == (404, "NoJobError")
