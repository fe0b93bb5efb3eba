"""End to end with the docker runtime: a real master, two agents on a real Docker Engine (tests/dockerkit.py)."""

from __future__ import annotations

import json
import socket
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dockerkit import IMAGE, containers_labelled
from tests.e2e.harness import TERMINAL, Cluster, cluster, wait_for
from tests.registrykit import PASSWORD, USER, Registry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def in_containers(tmp_path_factory: pytest.TempPathFactory, docker_host: str) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("docker")
    (tmp / "nfs").mkdir()
    (tmp / "nfs" / "README").write_text("shared across nodes\n")
    config = tmp / "cluster.yaml"  # a storage that every user may mount: a directory standing for an NFS mount
    # and a root for local codeDirs that also holds the agents' work dirs (tmp/node-a, tmp/node-b)
    config.write_text(json.dumps({"storages": [{"name": "shared", "path": str(tmp / "nfs")}],
                                  "localPaths": [{"path": str(tmp)}]}))
    with cluster(tmp, None, [("node-a", "127.0.0.2", 2), ("node-b", "127.0.0.3", 2)],
                 master_args=("--vc-config", str(config)),
                 agent_args=("--runtime", "docker", "--docker-host", docker_host, "--max-log-mb", "1")) as c:
        yield c


def _containers(docker_host: str, job: str) -> list[str]:
    return containers_labelled(docker_host, f"pai.job={job}")


def test_the_hello_job_spans_both_agents_in_containers(in_containers: Cluster, docker_host: str) -> None:
    c = in_containers
    spec = json.loads((ROOT / "examples" / "hello-v1.json").read_text())
    spec["jobName"], spec["image"] = f"hello-{uuid.uuid4().hex[:6]}", IMAGE
    key = c.submit(json.dumps(spec))
    detail = c.wait_state(key, TERMINAL, 60)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    tasks = c.tasks(detail)
    assert {t["containerIp"] for _, t in tasks} == {"127.0.0.2", "127.0.0.3"}
    workers = sorted((t for r, t in tasks if r == "worker"), key=lambda t: t["taskIndex"])
    host_list = ",".join(f"{t['containerIp']}:{t['containerPorts']['http']}" for t in workers)
    for role, t in tasks:
        assert f"role={role} index={t['taskIndex']} workers={host_list} " in c.log(key, role, t["taskIndex"])
        assert "image" not in (t.get("containerExitDiagnostics") or "")  # the image was used
    wait_for("no container left", lambda: _containers(docker_host, key) == [], 10)


def test_a_stopped_job_leaves_no_container(in_containers: Cluster, docker_host: str) -> None:
    c = in_containers
    key = c.submit(json.dumps({"jobName": f"sleep-{uuid.uuid4().hex[:6]}", "image": IMAGE, "taskRoles": [
        {"name": "w", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "sleep 600"}]}))
    wait_for("tasks running", lambda: all(t["taskState"] == "RUNNING" for _, t in c.tasks(c.job(key))), 30)
    assert len(_containers(docker_host, key)) == 2
    c.raw("PUT", f"/api/v2/jobs/{key}/executionType", b'{"value": "STOP"}', "application/json")
    assert c.wait_state(key, {"STOPPED"}, 20)["jobStatus"]["state"] == "STOPPED"
    wait_for("no container left", lambda: _containers(docker_host, key) == [], 10)


def test_a_missing_image_fails_the_job_without_retry(in_containers: Cluster, docker_registry: Registry) -> None:
    c = in_containers
    image = f"{docker_registry.address}/pai-test/absent:1"  # the registry answers: manifest unknown
    key = c.submit(f"""protocolVersion: 2
name: noimg-{uuid.uuid4().hex[:6]}
type: job
jobRetryCount: 3
prerequisites:
  - {{protocolVersion: 2, name: img, type: dockerimage, uri: "{image}",
     auth: {{username: {USER}, password: {PASSWORD}, registryuri: "{docker_registry.address}"}}}}
taskRoles:
  w:
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
    commands: ["true"]
""", "text/yaml")
    detail = c.wait_state(key, TERMINAL, 60)
    assert detail["jobStatus"]["state"] == "FAILED"
    (_, task), = c.tasks(detail)
    assert task["containerExitCode"] == -101 and task["containerExitSpec"]["type"] == "user"
    assert detail["jobStatus"]["retries"] == 0 and "manifest unknown" in task["containerExitDiagnostics"]


def test_an_unreachable_registry_requeues_the_job_without_counting_a_retry(in_containers: Cluster) -> None:
    c = in_containers
    with socket.socket() as s:  # a port nothing listens on: the engine's connections are refused
        s.bind(("127.0.0.1", 0))
        image = f"127.0.0.1:{s.getsockname()[1]}/img:tag"
    key = c.submit(json.dumps({"jobName": f"noreg-{uuid.uuid4().hex[:6]}", "image": image, "retryCount": 0,
                               "taskRoles": [{"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128,
                                              "gpuNumber": 0, "command": "true"}]}))

    def first_attempt_ended() -> dict[str, Any] | None:
        status, attempts = c.raw("GET", f"/api/v2/jobs/{key}/job-attempts")
        assert status == 200, attempts
        return next((a for a in attempts if a["attemptIndex"] == 0 and a["attemptCompletedTime"]), None)

    first = wait_for("the first attempt ended", first_attempt_ended, 60)  # 3 tries, 2 s and 4 s apart
    assert (first["exitCode"], first["exitPhrase"]) == (-102, "ImagePullFailed")
    assert (first["appExitSpec"]["type"], first["appExitSpec"]["retry"]) == ("platform", "transient")
    status, task = c.raw("GET", f"/api/v2/jobs/{key}/attempts/0/taskRoles/w/taskIndex/0/attempts")
    said = task["attempts"][-1]["containerExitDiagnostics"]  # the agent's reason, quoting the engine
    assert status == 200 and "connection refused" in said and "3 tries" in said, said
    detail = c.job(key)
    assert detail["jobStatus"]["state"] in {"WAITING", "RUNNING"}  # requeued, not failed with retryCount 0
    assert detail["jobStatus"]["retryDetails"]["user"] == 0 and detail["jobStatus"]["retryDetails"]["platform"] >= 1
    c.raw("PUT", f"/api/v2/jobs/{key}/executionType", b'{"value": "STOP"}', "application/json")
    assert c.wait_state(key, TERMINAL, 30)["jobStatus"]["state"] == "STOPPED"


def test_a_killed_agent_restarted_goes_on_with_the_same_container(in_containers: Cluster, docker_host: str) -> None:
    c = in_containers
    key = c.submit(json.dumps({"jobName": f"adopt-{uuid.uuid4().hex[:6]}", "image": IMAGE, "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0,
         "command": "echo started; sleep 5; echo done"}]}))
    wait_for("the task running", lambda: c.tasks(c.job(key))[0][1]["taskState"] == "RUNNING", 30)
    (_, task), = c.tasks(c.job(key))
    node = "node-a" if task["containerIp"] == "127.0.0.2" else "node-b"
    before = _containers(docker_host, key)
    c.kill(node)
    c.restart(node)
    detail = c.wait_state(key, TERMINAL, 40)
    assert detail["jobStatus"]["state"] == "SUCCEEDED"
    assert c.log(key, "w", 0) == "started\ndone\n"  # one run: the same container went on
    assert len(before) == 1


def test_a_killed_master_restarted_finds_its_containers_and_starts_no_duplicate(in_containers: Cluster,
                                                                               docker_host: str) -> None:
    c = in_containers
    key = c.submit(json.dumps({"jobName": f"mkill-{uuid.uuid4().hex[:6]}", "image": IMAGE, "taskRoles": [
        {"name": "w", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0,
         "command": "echo started; sleep 5; echo done"}]}))
    wait_for("tasks running", lambda: all(t["taskState"] == "RUNNING" for _, t in c.tasks(c.job(key))), 30)
    running = _containers(docker_host, key)
    c.kill("master")
    c.restart("master")
    c.wait_master()
    assert len(_containers(docker_host, key)) <= 2
    detail = c.wait_state(key, TERMINAL, 40)
    assert detail["jobStatus"]["state"] == "SUCCEEDED"
    assert [c.log(key, "w", i) for i in (0, 1)] == ["started\ndone\n"] * 2  # each ran once, in its container
    assert len(running) == 2
    wait_for("no container left", lambda: _containers(docker_host, key) == [], 10)


def test_an_allowed_storage_is_visible_inside_the_task_at_its_mount_path(in_containers: Cluster) -> None:
    c = in_containers
    name = f"storage-{uuid.uuid4().hex[:6]}"
    job = {"protocolVersion": 2, "name": name, "type": "job",
           "prerequisites": [{"name": "img", "type": "dockerimage", "uri": IMAGE}],
           "taskRoles": {"w": {"dockerImage": "img", "resourcePerInstance": {"cpu": 1, "memoryMB": 128, "gpu": 0},
                               "commands": ["cat /data/README", "echo $PAI_JOB_NAME > /data/$PAI_TASK_INDEX.out"]}},
           "extras": {"storages": [{"name": "shared", "mountPath": "/data"}]}}
    key = c.submit(json.dumps(job))
    detail = c.wait_state(key, TERMINAL, 60)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    assert c.log(key, "w", 0) == "shared across nodes\n"
    assert (c.tmp / "nfs" / "0.out").read_text() == f"{key}\n"
    status, body = c.raw("POST", "/api/v2/jobs", json.dumps({**job, "name": name + "-x", "extras": {
        "storages": [{"name": "elsewhere"}]}}).encode(), "application/json")
    assert status == 400 and body["message"].startswith("extras.storages[0].name: ")


def test_a_chatty_task_keeps_its_log_within_the_nodes_cap_and_the_master_says_so(in_containers: Cluster) -> None:
    c = in_containers
    # 48 x 64 KB = 3 MB of output against the agents' 1 MB cap (--max-log-mb 1)
    chatty = 'i=0; while [ $i -lt 48 ]; do printf "%065535d\\n" $i; i=$((i+1)); sleep 0.1; done; echo last line'
    spec = {"jobName": f"chatty-{uuid.uuid4().hex[:6]}", "image": IMAGE, "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": chatty}]}
    key = c.submit(json.dumps(spec))
    assert c.wait_state(key, TERMINAL, 60)["jobStatus"]["state"] == "SUCCEEDED"
    request = urllib.request.Request(f"{c.url}/api/v2/jobs/{key}/tasks/w/0/logs/stdout",
                                     headers={"Authorization": f"Bearer {c.api.http.token}"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        body = resp.read().decode()
        assert resp.headers["X-Log-Truncated"] == "true" and int(resp.headers["X-Log-Dropped"]) > 0
    assert body.endswith("last line\n") and len(body) <= 2 * (1 << 20) + 2 * 65536


def test_code_under_a_root_is_the_containers_working_directory(in_containers: Cluster) -> None:
    c = in_containers
    (c.tmp / "code").mkdir(exist_ok=True)
    (c.tmp / "code" / "main.sh").write_text('echo "in $(pwd)"\n')
    key = c.submit(json.dumps({"jobName": f"code-{uuid.uuid4().hex[:6]}", "image": IMAGE,
                               "codeDir": str(c.tmp / "code"), "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "sh main.sh"}]}))
    assert c.wait_state(key, TERMINAL, 60)["jobStatus"]["state"] == "SUCCEEDED"
    assert c.log(key, "w", 0) == "in /pai/code\n"


@pytest.mark.parametrize("where", [pytest.param("{t}/node-a", id="the agent's work dir"),
                                   pytest.param("file://{t}/node-a/attempts", id="its attempts folder")])
def test_the_agents_work_dir_as_code_dir_ends_the_attempt_before_any_container(in_containers: Cluster,
                                                                               docker_host: str, where: str) -> None:
    c, name = in_containers, f"steal-{uuid.uuid4().hex[:6]}"
    state = "/api/v2/nodes/node-b/state"  # the task runs on node-a, whose work dir it names
    assert c.raw("PUT", state, b'{"value": "CORDONED"}', "application/json")[0] == 200
    try:
        key = c.submit(json.dumps({"jobName": name, "image": IMAGE, "codeDir": where.format(t=c.tmp), "retryCount": 1,
                                   "taskRoles": [{"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128,
                                                  "gpuNumber": 0, "command": "cat /pai/code/*/*/secrets/*"}]}))
        detail = c.wait_state(key, TERMINAL, 60)
    finally:
        c.raw("PUT", state, b'{"value": "READY"}', "application/json")
    (_, task), = c.tasks(detail)
    assert detail["jobStatus"]["state"] == "FAILED" and detail["jobStatus"]["retries"] == 0, detail
    assert task["containerExitCode"] == -124 and task["containerIp"] == "127.0.0.2"
    assert "overlaps the node agent's work directory" in task["containerExitDiagnostics"]
    assert _containers(docker_host, key) == []  # no container was ever made
