"""OpenPAI's official JavaScript SDK (the VS Code extension is built on it), installed from npm at its latest
version, drives a live master with one agent: login, cluster info, VCs, storages, tokens, users, a two-instance
v2 job followed to SUCCEEDED, its config, filtered lists, a stop, OpenPAI's error codes, and the same calls under
OpenPAI's pylon prefix ``/rest-server``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import ADMIN_PASSWORD, Cluster, cluster

DRIVER = Path(__file__).resolve().parent / "js" / "drive_sdk.js"
SDK = "@microsoft/openpai-js-sdk"


def _require(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        message = f"{tool} is not installed (Debian: nodejs, npm); scripts/test.sh installs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SDK's latest published version, installed by npm into a directory of its own; its node_modules."""
    npm = _require("npm")
    _require("node")
    where = tmp_path_factory.mktemp("js-sdk")
    (where / "package.json").write_text(json.dumps({"name": "pai-sdk-test", "private": True}))
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund", f"{SDK}@latest"], cwd=where,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return where / "node_modules"


@pytest.fixture(scope="module")
def one_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("sdk-cluster"), None, [("node-a", "127.0.0.2", 4)]) as c:
        yield c


@pytest.fixture(scope="module")
def run(sdk: Path, one_agent: Cluster) -> dict[str, Any]:
    server = one_agent.url.removeprefix("http://")
    done = subprocess.run(["node", str(DRIVER), server, ADMIN_PASSWORD], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NODE_PATH": str(sdk)})
    assert done.returncode == 0, f"{done.stderr}\nsteps done: {done.stdout}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_cluster_info_vcs_storages_and_tokens(run: dict[str, Any]) -> None:
    assert run["info"]["launcherType"] == "k8s" and run["info"]["authnMethod"] == "basic"
    assert "default" in run["vcs"] and run["vc"]["resourcesTotal"]["cpu"] == 4
    assert run["storages"] == {"storages": []}
    assert len(run["tokens"]["tokens"]) >= 1  # the SDK's own login


def test_users_through_the_sdk(run: dict[str, Any]) -> None:
    assert run["createUser"] == {"message": "User is created successfully"}
    assert run["getUser"]["username"] == "sdkuser" and run["getUser"]["email"] == "sdk@example.com"
    assert run["getUser"]["virtualCluster"] == ["default"] and run["getUser"]["admin"] is False
    assert run["users"] == ["admin", "sdkuser"]
    assert {"default", "admingroup"} <= set(run["groups"])
    assert run["deleteUser"] == {"message": "user is removed successfully"}
    assert run["usersAfter"] == ["admin"]


def test_a_two_instance_job_runs_and_is_found(run: dict[str, Any]) -> None:
    assert run["submit"]["jobName"] == "admin~sdk-pair"
    detail = run["done"]
    assert detail["jobStatus"]["state"] == "SUCCEEDED"
    statuses = detail["taskRoles"]["worker"]["taskStatuses"]
    assert [t["taskIndex"] for t in statuses] == [0, 1] and all(t["taskState"] == "SUCCEEDED" for t in statuses)
    assert run["config"]["name"] == "sdk-pair" and run["config"]["taskRoles"]["worker"]["instances"] == 2
    assert run["listed"] == ["sdk-pair"] and run["listedOther"] == []


def test_attempts_task_logs_events_and_tags_through_the_sdk(run: dict[str, Any]) -> None:
    assert run["attempt0"]["jobStatus"]["attemptId"] == 0 and run["attempt0"]["jobStatus"]["appExitCode"] == 0
    task = run["task"]
    assert (task["taskRoleName"], task["taskIndex"], task["jobAttemptId"]) == ("worker", 1, 0)
    assert [a["attemptState"] for a in task["attempts"]] == ["SUCCEEDED"]
    assert [loc["name"] for loc in run["taskLogs"]["locations"]] == ["stdout", "stderr"]
    assert "I am 1 of 2" in run["stdout"]  # the log URI, read with the SDK's own token
    reasons = [e["reason"] for e in run["events"]["data"]]
    assert reasons[0] == "succeeded" and reasons[-1] == "submitted"
    assert run["addTag"]["message"] == "Add tag sdk-tag for job admin~sdk-pair successfully"
    assert run["tagged"] == ["sdk-pair"] and run["taggedAfter"] == []
    assert run["skuTypes"] == {}  # the test agent reports no GPU type


def test_the_sdk_under_openpai_s_pylon_prefix(run: dict[str, Any]) -> None:
    """``rest_server_uri: host/rest-server``, as OpenPAI's clients set it when the cluster answers /healthz."""
    pylon = run["pylon"]
    assert pylon["info"]["launcherType"] == "k8s"
    assert pylon["listed"] == ["sdk-long", "sdk-pair"] and pylon["state"] == "SUCCEEDED"
    assert pylon["configName"] == "sdk-pair" and pylon["submit"]["jobName"] == "admin~sdk-pylon"
    assert pylon["stop"]["message"] == "execute job admin~sdk-pylon successfully"
    assert (pylon["unknownJob"]["status"], pylon["unknownJob"]["code"]) == (404, "NoJobError")


def test_a_long_job_is_stopped(run: dict[str, Any]) -> None:
    assert run["stop"]["message"] == "execute job admin~sdk-long successfully"
    assert run["stopped"] == "STOPPED"


@pytest.mark.parametrize(
    ("case", "status", "code", "sdk_type"),
    [
        ("wrongPassword", 400, "IncorrectPasswordError", "PAIBaseError"),
        ("duplicateJob", 409, "ConflictJobError", "PAIBaseError"),
        ("unknownJob", 404, "NoJobError", "NoJobError"),
        ("unknownVc", 404, "NoVirtualClusterError", "PAIBaseError"),
        ("unknownUser", 400, "NoUserError", "NoUserError"),
        ("unknownStorage", 404, "NoStorageError", "PAIBaseError"),
        ("userCreatesUser", 403, "ForbiddenUserError", "ForbiddenUserError"),
    ],
)
def test_openpais_error_codes_reach_the_sdk(run: dict[str, Any], case: str, status: int, code: str,
                                            sdk_type: str) -> None:
    got = run["errors"][case]
    assert (got["status"], got["code"], got["type"]) == (status, code, sdk_type), got
    assert got["message"]
