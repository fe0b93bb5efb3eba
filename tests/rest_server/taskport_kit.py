"""A running task with labelled ports, as the master sees one, for the tunnel's and the proxy's tests: node n1 at
127.0.0.9 (a loopback address nothing else of the suite listens on), a job placed on it and reported running by
the node's heartbeat; the test itself serves the task's ports there."""

from __future__ import annotations

import json
from typing import Any

from pai.store import users
from tests.eventually import eventually
from tests.rest_server.conftest import AGENT_TOKEN, Api
from tests.rest_server.test_nodes import heartbeat

NODE_ADDRESS = "127.0.0.9"


def port_job(name: str, labels: tuple[str, ...] = ("web",)) -> str:
    ports = [{"label": label, "beginAt": 0, "portNumber": 1} for label in labels]
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "true",
         "portList": ports}]})


async def add_node(api: Api) -> None:
    reg = {"version": 1, "node": {"name": "n1", "address": NODE_ADDRESS,
                                  "resources": {"gpu": 0, "cpu": 16, "memoryMB": 65536}}}
    status, answer = await api.call("POST", "/api/internal/agents/register", json_body=reg, token=AGENT_TOKEN)
    assert status == 200, answer


async def placed(api: Api, name: str, labels: tuple[str, ...] = ("web",)) -> dict[str, Any]:
    """Job admin~``name`` placed on n1 (its task waits for its start); the task's status."""
    status, answer = await api.call("POST", "/api/v1/jobs", body=port_job(name, labels),
                                    content_type="application/json")
    assert status == 202, answer

    async def task() -> dict[str, Any] | None:
        _, detail = await api.call("GET", f"/api/v2/jobs/admin~{name}")
        t = detail["taskRoles"]["w"]["taskStatuses"][0]
        return dict(t) if t["containerId"] else None

    return await eventually(task, timeout=30, what=f"admin~{name} placed")


async def running(api: Api, name: str, labels: tuple[str, ...] = ("web",)) -> dict[str, int]:
    """Job admin~``name`` running on n1; its task's ports by label."""
    task = await placed(api, name, labels)
    report = {"attemptId": task["containerId"], "jobKey": f"admin~{name}", "role": "w", "index": 0,
              "status": "running"}
    await heartbeat(api, "n1", [report])

    async def started() -> bool:
        _, detail = await api.call("GET", f"/api/v2/jobs/admin~{name}")
        return bool(detail["taskRoles"]["w"]["taskStatuses"][0]["taskState"] == "RUNNING")

    await eventually(started, timeout=30, what=f"admin~{name}'s task RUNNING")
    return {label: int(p) for label, p in task["containerPorts"].items()}


async def exit_task(api: Api, name: str, code: int = 0) -> None:
    _, detail = await api.call("GET", f"/api/v2/jobs/admin~{name}")
    attempt = detail["taskRoles"]["w"]["taskStatuses"][0]["containerId"]
    await heartbeat(api, "n1", [{"attemptId": attempt, "jobKey": f"admin~{name}", "role": "w", "index": 0,
                                 "status": "exited", "exitCode": code}])


async def user(api: Api, name: str) -> str:
    """A user who is no admin; their token (``api`` stays the admin's)."""
    await api.write(lambda s: users.create_user(s, name, f"{name}-password"))
    admin = api.token
    token = await api.login(name, f"{name}-password")
    api.token = admin
    return token


async def events(api: Api, key: str, kind: str) -> list[dict[str, Any]]:
    _, answer = await api.call("GET", f"/api/v2/jobs/{key}/events")
    return [e for e in answer["data"] if e["reason"] == kind]
