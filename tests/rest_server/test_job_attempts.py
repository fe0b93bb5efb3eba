"""A job's attempts, its tasks' attempts and their log lists, events and tags, in OpenPAI's paths and
shapes (what its portal, JS SDK and VS Code extension read)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pai.store import users
from tests.eventually import eventually
from tests.rest_server.conftest import Api
from tests.rest_server.test_nodes import heartbeat
from tests.rest_server.test_vcs import add_node

KEY = "admin~r"
JOB = f"/api/v2/jobs/{KEY}"


def retried_job(name: str = "r", retries: int = 1) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "retryCount": retries, "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "true"}]})


async def _attempt_of(api: Api, key: str, attempt_id: int, state: str) -> dict[str, Any]:
    """The job's detail once its attempt ``attempt_id`` is in ``state`` (an attempt id, not a transient job state
    such as WAITING, which a fast re-admission can skip between two polls)."""
    async def seen() -> dict[str, Any] | None:
        _, detail = await api.call("GET", f"/api/v2/jobs/{key}")
        status = detail["jobStatus"]
        return dict(detail) if (status["attemptId"], status["state"]) == (attempt_id, state) else None
    return await eventually(seen, what=f"{key} attempt {attempt_id} {state}")


async def _run_attempt(api: Api, key: str, attempt_id: int, exit_code: int) -> str:
    """Attempt ``attempt_id`` of the job's task runs on n1 and exits ``exit_code``; returns the container id."""
    detail = await _attempt_of(api, key, attempt_id, "RUNNING")
    task = detail["taskRoles"]["w"]["taskStatuses"][0]
    attempt = str(task["containerId"])
    report = {"attemptId": attempt, "jobKey": key, "role": "w", "index": 0, "status": "running"}
    await heartbeat(api, "n1", [report])
    await heartbeat(api, "n1", [{**report, "status": "exited", "exitCode": exit_code}])
    return attempt


@pytest.fixture
async def retried(api: Api) -> tuple[Api, str, str]:
    """A job whose first attempt failed (exit 1, retried: counted) and whose second succeeded."""
    await add_node(api, "n1")
    status, _ = await api.call("POST", "/api/v1/jobs", body=retried_job(), content_type="application/json")
    assert status == 202
    first = await _run_attempt(api, KEY, 0, 1)
    second = await _run_attempt(api, KEY, 1, 0)
    await _attempt_of(api, KEY, 1, "SUCCEEDED")
    return api, first, second


async def test_the_detail_is_the_latest_attempt_in_openpai_shape(retried: tuple[Api, str, str]) -> None:
    api, first, second = retried
    status, detail = await api.call("GET", JOB)
    assert status == 200
    assert (detail["name"], detail["tags"], detail["jobPriority"]) == ("r", [], "test")
    assert detail["debugId"]
    s = detail["jobStatus"]
    assert (s["state"], s["attemptId"], s["attemptState"], s["appExitCode"], s["appExitType"]) == \
        ("SUCCEEDED", 1, "SUCCEEDED", 0, "Succeeded")
    assert (s["retries"], s["retryDetails"]) == (1, {"user": 1, "platform": 0, "resource": 0})
    assert s["appExitTriggerTaskRoleName"] is None
    assert isinstance(s["submissionTime"], int) and s["submissionTime"] <= s["appCreatedTime"]
    task = detail["taskRoles"]["w"]["taskStatuses"][0]
    assert (task["containerId"], task["attemptId"], task["containerExitCode"], task["accountableRetries"]) == \
        (second, 0, 0, 0)
    assert task["containerLog"] == f"{JOB}/attempts/1/taskRoles/w/taskIndex/0/attempts/0/logs"
    assert task["completedTime"] >= task["launchedTime"] >= task["createdTime"]


async def test_job_attempts_latest_first_each_with_its_tasks_and_trigger(retried: tuple[Api, str, str]) -> None:
    api, first, second = retried
    status, attempts = await api.call("GET", f"{JOB}/job-attempts")
    assert status == 200
    assert [(a["attemptIndex"], a["isLatest"], a["state"], a["exitCode"]) for a in attempts] == \
        [(1, True, "SUCCEEDED", 0), (0, False, "FAILED", 1)]
    old = attempts[1]
    assert (old["appExitTriggerTaskRoleName"], old["appExitTriggerTaskIndex"], old["exitPhrase"]) == \
        ("w", 0, "UserError")
    assert old["taskRoles"]["w"]["taskStatuses"][0]["containerId"] == first
    assert old["frameworkName"] == KEY and old["jobName"] == "r"
    status, one = await api.call("GET", f"{JOB}/job-attempts/0")
    assert status == 200 and one == old
    status, text = await api.call("GET", f"{JOB}/job-attempts/healthz")
    assert (status, text) == (200, "ok")


async def test_an_earlier_attempt_reads_as_a_job_detail(retried: tuple[Api, str, str]) -> None:
    api, first, _ = retried
    status, detail = await api.call("GET", f"{JOB}/attempts/0")
    assert status == 200
    s = detail["jobStatus"]
    assert (s["attemptId"], s["attemptState"], s["appExitCode"], s["appExitType"]) == (0, "FAILED", 1, "Failed")
    assert s["state"] == "SUCCEEDED"  # the job's own state is the job's as it is now
    task = detail["taskRoles"]["w"]["taskStatuses"][0]
    assert (task["containerId"], task["taskState"], task["containerExitCode"]) == (first, "FAILED", 1)
    _, now = await api.call("GET", JOB)
    assert task["taskUid"] == now["taskRoles"]["w"]["taskStatuses"][0]["taskUid"]  # one task, across attempts
    for missing in ("attempts/2", "job-attempts/7"):
        status, body = await api.call("GET", f"{JOB}/{missing}")
        assert (status, body["code"]) == (404, "NoJobError")
        assert "its attempts: 0, 1" in body["message"]


async def test_a_task_s_attempts_and_their_log_lists(retried: tuple[Api, str, str]) -> None:
    api, first, _ = retried
    status, task = await api.call("GET", f"{JOB}/attempts/0/taskRoles/w/taskIndex/0/attempts")
    assert status == 200
    assert (task["username"], task["jobName"], task["jobAttemptId"], task["taskRoleName"]) == ("admin", "r", 0, "w")
    assert [(a["attemptId"], a["containerId"], a["containerExitCode"]) for a in task["attempts"]] == [(0, first, 1)]
    status, logs = await api.call("GET", task["attempts"][0]["containerLog"])
    assert status == 200
    base = f"/api/v2/jobs/{KEY}/tasks/w/0/logs"
    assert logs == {"locations": [{"name": "stdout", "uri": f"{base}/stdout?attempt={first}"},
                                  {"name": "stderr", "uri": f"{base}/stderr?attempt={first}"}]}
    _, tail = await api.call("GET", task["attempts"][0]["containerLog"] + "?tail-mode=true")
    assert tail["locations"][0]["uri"].endswith(f"attempt={first}&tail=16384")
    status, body = await api.call("GET", f"{JOB}/attempts/0/taskRoles/w/taskIndex/0/attempts/3/logs")
    assert (status, body["code"]) == (404, "NoTaskLogError")
    for path in ("attempts/0/taskRoles/ps/taskIndex/0/attempts", "attempts/0/taskRoles/w/taskIndex/1/attempts"):
        status, body = await api.call("GET", f"{JOB}/{path}")
        assert (status, body["code"]) == (404, "NoJobError") and "has no task" in body["message"]


async def test_events_newest_first_and_by_type(retried: tuple[Api, str, str]) -> None:
    api, _, _ = retried
    status, events = await api.call("GET", f"{JOB}/events")
    assert status == 200 and events["totalCount"] == len(events["data"]) > 2
    times = [e["lastTimestamp"] for e in events["data"]]
    assert times == sorted(times, reverse=True)
    assert events["data"][0]["reason"] == "succeeded"
    _, warnings = await api.call("GET", f"{JOB}/events?type=Warning")
    assert [e["reason"] for e in warnings["data"]] == ["retried"]
    assert warnings["data"][0]["frameworkName"] == KEY
    status, body = await api.call("GET", f"{JOB}/events?type=Error")
    assert (status, body["code"]) == (400, "InvalidParametersError") and body["message"].startswith("type:")


async def _listed(api: Api, query: str) -> list[str]:
    status, body = await api.call("GET", f"/api/v2/jobs?{query}")
    assert status == 200, body
    return [j["name"] for j in body]


async def test_tags_added_removed_and_filtered_on(api: Api) -> None:
    for name in ("a", "b", "c"):
        await api.call("POST", "/api/v1/jobs", body=retried_job(name), content_type="application/json")
    for name, tag in (("a", "baseline"), ("b", "baseline"), ("b", "fp16"), ("a", "baseline")):
        status, body = await api.call("PUT", f"/api/v2/jobs/admin~{name}/tag", json_body={"value": tag})
        assert status == 200, body
    assert "had it already" in body["message"]
    assert await _listed(api, "tagsContain=baseline") == ["b", "a"]
    assert await _listed(api, "tagsContain=fp16,nothing") == ["b"]
    assert await _listed(api, "tagsNotContain=fp16") == ["c", "a"]
    assert await _listed(api, "tagsContain=baseline&tagsNotContain=fp16") == ["a"]
    _, listed = await api.call("GET", "/api/v2/jobs?tagsContain=fp16")
    assert listed[0]["tags"] == ["baseline", "fp16"]
    _, detail = await api.call("GET", "/api/v2/jobs/admin~b")
    assert detail["tags"] == ["baseline", "fp16"]
    status, _ = await api.call("DELETE", "/api/v2/jobs/admin~b/tag", json_body={"value": "baseline"})
    assert status == 200
    assert await _listed(api, "tagsContain=baseline") == ["a"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        pytest.param("PUT", "admin~a/tag", {}, 400, "InvalidParametersError", id="no value"),
        pytest.param("PUT", "admin~a/tag", {"value": ""}, 400, "InvalidParametersError", id="empty"),
        pytest.param("PUT", "admin~a/tag", {"value": "x" * 257}, 400, "InvalidParametersError", id="too long"),
        pytest.param("PUT", "admin~none/tag", {"value": "t"}, 404, "NoJobError", id="unknown job"),
        pytest.param("DELETE", "admin~none/tag", {"value": "t"}, 404, "NoJobError", id="unknown job, delete"),
    ],
)
async def test_tag_refusals(api: Api, method: str, path: str, body: dict[str, Any], status: int, code: str) -> None:
    await api.call("POST", "/api/v1/jobs", body=retried_job("a"), content_type="application/json")
    got, answer = await api.call(method, f"/api/v2/jobs/{path}", json_body=body)
    assert (got, answer["code"]) == (status, code)
    _, detail = await api.call("GET", "/api/v2/jobs/admin~a")
    assert detail["tags"] == []


async def test_only_the_owner_or_an_admin_tags_a_job(api: Api) -> None:
    await api.call("POST", "/api/v1/jobs", body=retried_job("a"), content_type="application/json")
    await api.write(lambda s: users.create_user(s, "bob", "bob-password"))
    bob = await api.login("bob", "bob-password")
    status, body = await api.call("PUT", "/api/v2/jobs/admin~a/tag", json_body={"value": "mine"}, token=bob)
    assert (status, body["code"]) == (403, "ForbiddenUserError")
    _, detail = await api.call("GET", "/api/v2/jobs/admin~a", token=bob)
    assert detail["tags"] == []
