"""Small builders of the master's JSON answers (shapes of /tmp/rest_contract.md)."""

from __future__ import annotations

from typing import Any

T0 = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC, in ms


def job_summary(name: str = "mnist", **over: Any) -> dict[str, Any]:
    job = {
        "name": name, "username": "admin", "state": "RUNNING", "subState": "RUNNING", "executionType": "START",
        "retries": 0, "createdTime": T0, "completedTime": None, "appExitCode": None, "virtualCluster": "default",
        "totalGpuNumber": 2, "totalTaskNumber": 3, "totalTaskRoleNumber": 2, "priority": "test",
    }
    return job | over


def task_status(index: int = 0, **over: Any) -> dict[str, Any]:
    task = {
        "taskIndex": index, "taskState": "RUNNING", "containerId": f"c{index}", "containerIp": "10.0.0.1",
        "containerNodeName": "node1", "containerPorts": {"http": "20001", "ssh": "20002"}, "containerGpus": 1,
        "containerExitCode": None, "containerExitSpec": None, "retries": 0, "startedTime": T0, "completedTime": None,
    }
    return task | over


def job_detail(
    name: str = "mnist",
    state: str = "RUNNING",
    roles: dict[str, list[dict[str, Any]]] | None = None,
    events: list[dict[str, Any]] | None = None,
    **status: Any,
) -> dict[str, Any]:
    job_status = {
        "username": "admin", "state": state, "subState": state, "executionType": "START", "retries": 0,
        "createdTime": T0, "completedTime": None, "appExitCode": None, "appExitSpec": None,
        "appExitDiagnostics": None, "virtualCluster": "default", "priority": "test", "waitingReason": None,
    }
    roles = roles if roles is not None else {"worker": [task_status(0)]}
    return {
        "name": name,
        "jobStatus": job_status | status,
        "taskRoles": {r: {"taskRoleStatus": {"name": r}, "taskStatuses": ts} for r, ts in roles.items()},
        "events": events or [],
    }


def node(name: str = "node1", **over: Any) -> dict[str, Any]:
    item = {
        "name": name, "address": "127.0.0.2", "state": "READY", "lastHeartbeat": T0, "gpuType": "A100",
        "labels": {}, "total": {"gpu": 4, "cpu": 8, "memoryMB": 16384},
        "used": {"gpu": 2, "cpu": 3.5, "memoryMB": 4096},
    }
    return item | over
