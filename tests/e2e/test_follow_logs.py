"""``pai logs -f`` and the API's follow form against a real master and agents (SQLite and PostgreSQL): a task's
output as it is written, across a retried attempt, until the task ends; unknown roles and indices named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.harness import Cluster, wait_for

ROOT = Path(__file__).resolve().parents[2]


def pai_process(c: Cluster, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PAI_MASTER_URL": c.url, "PAI_TOKEN": str(c.api.http.token), "PAI_USER": "admin",
           "HOME": str(c.tmp)}
    return subprocess.Popen([sys.executable, "-m", "pai", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)


def retried_job(name: str, gate: Path) -> str:
    """A job whose first attempt says so, waits for ``gate``, and fails; its retry says so and succeeds."""
    command = (f'if [ -e {gate}.second ]; then echo second-attempt; exit 0; fi; touch {gate}.second; '
               f'echo first-attempt; while [ ! -e {gate} ]; do sleep 0.05; done; echo first-ends; exit 3')
    return json.dumps({"jobName": name, "image": "busybox", "retryCount": 1, "taskRoles": [
        {"name": "worker", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": command}]})


def test_follow_shows_both_attempts_with_a_marker_and_ends_with_the_task(two_agents: Cluster, tmp_path: Path) -> None:
    c = two_agents
    gate = tmp_path / "gate"
    key = c.submit(retried_job("follow-retry", gate))
    key = key if "~" in key else f"admin~{key}"
    follower = pai_process(c, "logs", key, "-f")  # before the first attempt: it waits for it
    assert follower.stdout is not None
    assert follower.stdout.readline() == "first-attempt\n"  # arrives while the attempt runs
    gate.touch()
    rest, err = follower.communicate(timeout=120)
    assert follower.returncode == 0, err
    lines = rest.splitlines()
    assert lines[0] == "first-ends" and lines[-1] == "second-attempt"
    assert lines[1].startswith("==> attempt 2 of worker[0] on node node-") and lines[1].endswith(" <==")
    assert f"task worker[0] of job {key} ended: SUCCEEDED (exit code 0); job SUCCEEDED" in err

    # once ended: a follow with --since shows every attempt since then, each whole, and ends at once
    again = pai_process(c, "logs", key, "-f", "--since", "1h")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert out.splitlines()[0] == "first-attempt" and out.splitlines()[-1] == "second-attempt"
    assert out.count("==> attempt 2 of worker[0]") == 1
    # without --since: the latest attempt only; --tail cuts it
    latest = pai_process(c, "logs", key, "-f", "--tail", "8")
    assert latest.communicate(timeout=60)[0] == "attempt\n"


@pytest.mark.parametrize("follow", ["true", "false"])
def test_an_unknown_role_or_index_is_a_404_that_names_it(two_agents: Cluster, follow: str) -> None:
    c = two_agents
    key = c.submit(json.dumps({"jobName": f"named-{follow}", "image": "busybox", "taskRoles": [
        {"name": "worker", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "true"}]}))
    key = key if "~" in key else f"admin~{key}"
    base = f"/api/v2/jobs/{key}/tasks"
    status, body = c.raw("GET", f"{base}/nosuch/0/logs/stdout?follow={follow}")
    assert (status, body["code"]) == (404, "NoTaskRoleError") and "'nosuch'" in body["message"]
    assert "worker" in body["message"]  # the roles it has
    status, body = c.raw("GET", f"{base}/worker/2/logs/stdout?follow={follow}")
    assert (status, body["code"]) == (404, "NoTaskRoleError") and "no index 2" in body["message"]


def test_the_cli_names_an_unknown_role(two_agents: Cluster) -> None:
    c = two_agents
    wait_for("hello-ish job", lambda: c.submit(json.dumps({"jobName": "cli-role", "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "true"}]})))
    for args in (["logs", "admin~cli-role", "--role", "nosuch"], ["logs", "admin~cli-role", "--role", "nosuch", "-f"]):
        proc = pai_process(c, *args)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1 and "NoTaskRoleError" in err and "nosuch" in err and "no attempt" not in err
