"""Where a job's code may come from, end to end on the process runtime: a master whose configuration lists
``localPaths`` roots (one of which holds the master's data directory and the agent's work directory), an agent, and
a non-admin user. The docker runtime's side is in test_docker.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.e2e.harness import TERMINAL, Cluster, cluster

BOB_PASSWORD = "bob-password-1"


def write_config(path: Path, roots: list[Path]) -> None:
    path.write_text(json.dumps({"localPaths": [{"path": str(r)} for r in roots]}))


@pytest.fixture(scope="module")
def extra_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    extra = tmp_path_factory.mktemp("extra-root")
    (extra / "code").mkdir()
    (extra / "code" / "main.sh").write_text("echo from the extra root\n")
    return extra


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, extra_root: Path) -> Iterator[Cluster]:
    """An admin's root that holds everything of the test (the master's data dir tmp/master, the agent's work dir
    tmp/node-a), and a second root elsewhere; bob, a user who is no admin."""
    tmp = tmp_path_factory.mktemp("local-paths")
    (tmp / "shared" / "code").mkdir(parents=True)
    (tmp / "shared" / "code" / "main.sh").write_text('echo "code says hi from $(basename $(pwd))"\n')
    outside = tmp_path_factory.mktemp("outside")  # off every root
    (outside / "secret").write_text("not for jobs\n")
    (tmp / "shared" / "out-link").symlink_to(outside)
    write_config(tmp / "cluster.json", [tmp, extra_root])
    with cluster(tmp, None, [("node-a", "127.0.0.2", 4)], master_args=("--vc-config", str(tmp / "cluster.json"))) as c:
        c.api.create_user({"username": "bob", "password": BOB_PASSWORD})
        yield c


def as_bob(c: Cluster) -> Cluster:
    bob = Cluster(c.url, MasterApi(HttpClient(c.url, timeout=10)), c.tmp)
    bob.api.http.token = bob.api.login("bob", BOB_PASSWORD)["token"]
    return bob


def job(name: str, command: str, **fields: Any) -> str:
    return json.dumps({"jobName": name, "image": "busybox", **fields, "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": command}]})


def the_task(c: Cluster, key: str) -> dict[str, Any]:
    (_, task), = c.tasks(c.job(key))
    return task


def test_code_under_a_root_runs(local: Cluster) -> None:
    bob = as_bob(local)
    key = bob.submit(job(f"ok-{uuid.uuid4().hex[:6]}", "sh main.sh", codeDir=str(local.tmp / "shared" / "code")))
    detail = bob.wait_state(key, TERMINAL)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    assert bob.log(key, "w", 0) == "code says hi from code\n"


# (field, value with {t} the cluster's directory, the rule's words with {o} where the link leads)
REFUSED = [
    pytest.param("codeDir", "/etc", "is not under a local path this user may use", id="plain path outside"),
    pytest.param("codeDir", "file:///etc", "is not under a local path", id="file URL outside"),
    pytest.param("codeDir", "{t}/shared/out-link", "(resolved: {o})", id="a symlink that points out"),
    pytest.param("codeDir", "{t}/shared/../outside", "'..' is not allowed", id="dot-dot"),
    pytest.param("codeDir", "{t}/master", "overlaps the master's data directory", id="the master's data dir"),
    pytest.param("dataDir", "file:///etc", "is not under a local path", id="dataDir outside"),
    pytest.param("outputDir", "{t}/master/out", "overlaps the master's data directory", id="outputDir in the master's"),
]


@pytest.mark.parametrize(("field", "value", "words"), REFUSED)
def test_a_path_off_the_roots_is_a_400_naming_the_field_and_nothing_is_stored(local: Cluster, field: str,
                                                                              value: str, words: str) -> None:
    bob, name = as_bob(local), f"off-{uuid.uuid4().hex[:6]}"
    value = value.format(t=local.tmp)
    status, body = bob.raw("POST", "/api/v2/jobs", job(name, "true", **{field: value}).encode(), "application/json")
    assert (status, body["code"]) == (400, "InvalidProtocolError"), body
    outside = (local.tmp / "shared" / "out-link").resolve()
    assert body["message"].startswith(f"{field}: {value!r}: ") and words.format(o=outside) in body["message"]
    assert bob.raw("GET", f"/api/v2/jobs/bob~{name}")[0] == 404


@pytest.mark.parametrize("code_dir", [
    pytest.param("{t}/node-a", id="the agent's work dir"),
    pytest.param("file://{t}/node-a/attempts", id="its attempts folder"),
])
def test_the_agents_work_dir_under_an_admins_root_ends_the_attempt_on_the_node_and_nothing_runs(
        local: Cluster, code_dir: str) -> None:
    bob, marker = as_bob(local), local.tmp / f"ran-{uuid.uuid4().hex}"
    key = bob.submit(job(f"steal-{uuid.uuid4().hex[:6]}", f"cat */secrets/* > {marker}", retryCount=2,
                         codeDir=code_dir.format(t=local.tmp)))
    detail = bob.wait_state(key, TERMINAL)
    task = the_task(bob, key)
    assert detail["jobStatus"]["state"] == "FAILED" and detail["jobStatus"]["retries"] == 0, detail
    assert task["containerExitCode"] == -124 and task["containerExitSpec"]["type"] == "platform"
    assert "overlaps the node agent's work directory" in task["containerExitDiagnostics"]
    assert not marker.exists()


def test_a_root_taken_away_after_submission_ends_the_attempt_with_local_path_not_allowed(
        local: Cluster, extra_root: Path) -> None:
    """Runs last: it restarts the master with a configuration that no longer lists the extra root."""
    c, bob = local, as_bob(local)
    assert c.raw("PUT", "/api/v2/nodes/node-a/state", b'{"value": "CORDONED"}', "application/json")[0] == 200
    key = bob.submit(job(f"late-{uuid.uuid4().hex[:6]}", "sh main.sh", codeDir=str(extra_root / "code")))
    assert bob.job(key)["jobStatus"]["state"] == "WAITING"
    write_config(c.tmp / "cluster.json", [c.tmp])
    c.restart("master")
    c.wait_master()
    assert c.raw("PUT", "/api/v2/nodes/node-a/state", b'{"value": "READY"}', "application/json")[0] == 200
    detail = bob.wait_state(key, TERMINAL)
    task = the_task(bob, key)
    assert detail["jobStatus"]["state"] == "FAILED", detail
    assert task["containerExitCode"] == -124 and "is not under a local path" in task["containerExitDiagnostics"]
    assert str(extra_root / "code") in task["containerExitDiagnostics"]
