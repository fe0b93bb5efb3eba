"""Small builders of v1 / v2 job documents: a valid one-role job, overridden where a test cares."""

from __future__ import annotations

import json
from typing import Any

import yaml

from pai.jobspec import ParsedJob, parse_job


def v1_role(**over: Any) -> dict[str, Any]:
    role: dict[str, Any] = {
        "name": "worker",
        "taskNumber": 1,
        "cpuNumber": 1,
        "memoryMB": 256,
        "gpuNumber": 0,
        "command": "echo hi",
    }
    role.update(over)
    return role


def v1_job(*roles: dict[str, Any], **over: Any) -> dict[str, Any]:
    job: dict[str, Any] = {"jobName": "job", "image": "busybox", "taskRoles": list(roles) or [v1_role()]}
    job.update(over)
    return job


def v2_role(**over: Any) -> dict[str, Any]:
    role: dict[str, Any] = {
        "instances": 1,
        "dockerImage": "image",
        "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0},
        "commands": ["echo hi"],
    }
    role.update(over)
    return role


def v2_job(roles: dict[str, dict[str, Any]] | None = None, **over: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "protocolVersion": 2,
        "name": "job",
        "type": "job",
        "prerequisites": [{"name": "image", "type": "dockerimage", "uri": "busybox"}],
        "taskRoles": roles or {"worker": v2_role()},
    }
    job.update(over)
    return job


def parse_v1(job: dict[str, Any]) -> ParsedJob:
    return parse_job(json.dumps(job), "application/json")


def parse_v2(job: dict[str, Any]) -> ParsedJob:
    return parse_job(yaml.safe_dump(job, sort_keys=False), "text/yaml")
