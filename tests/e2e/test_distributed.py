"""End to end: real master and agent processes, jobs over REST, tasks as real processes."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from tests.e2e.harness import TERMINAL, Cluster, processes_with, wait_for
from tests.webhdfs import webhdfs

ROOT = Path(__file__).resolve().parents[2]


def v1_job(name: str, roles: list[dict[str, Any]], **extra: Any) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": roles, **extra})


def v1_role(name: str, n: int, command: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "taskNumber": n, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": command,
            **extra}


def test_hello_example_spans_both_agents_and_every_task_sees_the_host_lists(two_agents: Cluster) -> None:
    c = two_agents
    spec = json.loads((ROOT / "examples" / "hello-v1.json").read_text())
    spec["jobName"] = f"hello-{uuid.uuid4().hex[:6]}"
    key = c.submit(json.dumps(spec))
    detail = c.wait_state(key, TERMINAL)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    tasks = c.tasks(detail)
    assert len(tasks) == 3
    assert {t["containerIp"] for _, t in tasks} == {"127.0.0.2", "127.0.0.3"}
    workers = sorted((t for r, t in tasks if r == "worker"), key=lambda t: t["taskIndex"])
    host_list = ",".join(f"{t['containerIp']}:{t['containerPorts']['http']}" for t in workers)
    for role, t in tasks:
        out = c.log(key, role, t["taskIndex"])
        # the example prints: role=$PAI_CURRENT_TASK_ROLE_NAME index=$PAI_TASK_INDEX
        #                     workers=$PAI_TASK_ROLE_worker_HOST_LIST ps=...
        assert f"role={role} index={t['taskIndex']} workers={host_list} " in out, out
        assert t["containerExitCode"] == 0


def test_env_pairs_ports_per_node_without_collisions(two_agents: Cluster) -> None:
    c = two_agents
    key = c.submit(v1_job(f"ports-{uuid.uuid4().hex[:6]}", [
        v1_role("w", 3, "echo PORTS=$PAI_CONTAINER_HOST_PORT_LIST", portList=[{"label": "tb", "beginAt": 0,
                                                                                  "portNumber": 2}])]))
    detail = c.wait_state(key, TERMINAL)
    assert detail["jobStatus"]["state"] == "SUCCEEDED"
    seen: set[tuple[str, str]] = set()
    for _, t in c.tasks(detail):
        ports = [p for v in t["containerPorts"].values() for p in v.split(",")]
        assert set(t["containerPorts"]) == {"http", "ssh", "tb"}
        for p in ports:
            assert (t["containerIp"], p) not in seen
            seen.add((t["containerIp"], p))
    assert len(seen) == 12


def test_worker_exit_code_fails_the_job_and_shows_on_the_task(two_agents: Cluster) -> None:
    c = two_agents
    key = c.submit(v1_job(f"fail-{uuid.uuid4().hex[:6]}", [
        v1_role("worker", 2, 'if [ "$PAI_TASK_INDEX" = 1 ]; then exit 3; fi; sleep 30')]))
    detail = c.wait_state(key, TERMINAL)
    assert detail["jobStatus"]["state"] == "FAILED"
    assert detail["jobStatus"]["appExitCode"] == 3
    by_index = {t["taskIndex"]: t for _, t in c.tasks(detail)}
    assert by_index[1]["containerExitCode"] == 3
    assert by_index[1]["taskState"] == "FAILED"
    assert by_index[1]["containerExitSpec"]["type"] == "user"
    assert by_index[0]["taskState"] == "STOPPED"


def test_stop_reaches_stopped_within_ten_seconds_and_leaves_no_process(two_agents: Cluster) -> None:
    c = two_agents
    marker = f"pai-e2e-{uuid.uuid4().hex}"
    key = c.submit(v1_job(f"sleep-{uuid.uuid4().hex[:6]}", [
        v1_role("worker", 2, f"sleep 600 & sleep 600; echo {marker}")]))
    wait_for("tasks running", lambda: all(t["taskState"] == "RUNNING" for _, t in c.tasks(c.job(key))), 30)
    assert len(processes_with(marker)) >= 2
    started = time.monotonic()
    status, body = c.raw("PUT", f"/api/v2/jobs/{key}/executionType", json.dumps({"value": "STOP"}).encode(),
                         "application/json")
    assert status == 202, body
    detail = c.wait_state(key, {"STOPPED"}, timeout=10)
    assert time.monotonic() - started < 10
    assert {t["taskState"] for _, t in c.tasks(detail)} == {"STOPPED"}
    wait_for("no task process left", lambda: processes_with(marker) == [], 5)


def test_job_larger_than_any_node_waits_with_a_reason_and_does_not_block_others(two_agents: Cluster) -> None:
    c = two_agents
    big = c.submit(v1_job(f"big-{uuid.uuid4().hex[:6]}", [v1_role("w", 1, "true", cpuNumber=64)]))
    small = c.submit(v1_job(f"small-{uuid.uuid4().hex[:6]}", [v1_role("w", 1, "true")]))
    assert c.wait_state(small, TERMINAL)["jobStatus"]["state"] == "SUCCEEDED"
    reason = wait_for("a waiting reason", lambda: c.job(big)["jobStatus"]["waitingReason"], 10)
    assert c.job(big)["jobStatus"]["state"] == "WAITING"
    assert "64" in reason["message"] and reason["code"]
    c.raw("PUT", f"/api/v2/jobs/{big}/executionType", b'{"value": "STOP"}', "application/json")
    assert c.wait_state(big, {"STOPPED"}, 10)


def test_nodes_report_resources_and_heartbeats(two_agents: Cluster) -> None:
    nodes = {n["name"]: n for n in two_agents.api.nodes()}
    assert nodes["node-a"]["address"] == "127.0.0.2" and nodes["node-b"]["address"] == "127.0.0.3"
    assert nodes["node-a"]["total"]["cpu"] == 2
    assert nodes["node-a"]["state"] == "READY"
    assert time.time() * 1000 - nodes["node-a"]["lastHeartbeat"] < 10_000


def test_torch_distributed_allreduce_uses_only_the_injected_rendezvous_variables(two_agents: Cluster) -> None:
    from pai.cli.submit import prepare_spec

    c = two_agents
    path = ROOT / "examples" / "torch-allreduce.json"
    spec = json.loads(prepare_spec(path.read_text(), str(path)).body)
    spec["jobName"] = f"allreduce-{uuid.uuid4().hex[:6]}"
    key = c.submit(json.dumps(spec))
    detail = c.wait_state(key, TERMINAL, timeout=120)
    outputs = {t["taskIndex"]: c.log(key, "worker", t["taskIndex"]) for _, t in c.tasks(detail)}
    assert detail["jobStatus"]["state"] == "SUCCEEDED", (detail, outputs,
                                                        {i: c.log(key, "worker", i, "stderr") for i in outputs})
    assert "rank 0/2: all_reduce sum=3 expected=3 OK" in outputs[0]
    assert "rank 1/2: all_reduce sum=3 expected=3 OK" in outputs[1]


def test_a_code_dir_on_hdfs_is_the_tasks_working_directory(two_agents: Cluster, tmp_path: Path) -> None:
    c = two_agents
    (tmp_path / "hdfs" / "jobs" / "code").mkdir(parents=True)
    (tmp_path / "hdfs" / "jobs" / "code" / "hello.sh").write_text('echo "from hdfs on $PAI_CURRENT_TASK_ROLE_NAME"\n')
    with webhdfs(tmp_path / "hdfs") as fs:
        base = fs.namenode.replace("http://", "webhdfs://")
        key = c.submit(v1_job(f"hdfs-{uuid.uuid4().hex[:6]}", [v1_role("w", 2, "sh hello.sh")],
                              codeDir=f"{base}/jobs/code"))
        detail = c.wait_state(key, TERMINAL)
        assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
        assert [c.log(key, "w", i) for i in (0, 1)] == ["from hdfs on w\n"] * 2
        missing = c.submit(v1_job(f"nohdfs-{uuid.uuid4().hex[:6]}", [v1_role("w", 1, "true")], retryCount=2,
                                  codeDir=f"{base}/jobs/missing"))
        detail = c.wait_state(missing, TERMINAL)
    assert detail["jobStatus"]["state"] == "FAILED" and detail["jobStatus"]["retries"] == 0
    (_, task), = c.tasks(detail)
    assert task["containerExitCode"] == -120 and "does not exist on HDFS" in task["containerExitDiagnostics"]


def test_the_logs_of_an_earlier_attempt_stay_readable(two_agents: Cluster, tmp_path: Path) -> None:
    c = two_agents
    marker = tmp_path / f"tried-{uuid.uuid4().hex}"
    key = c.submit(v1_job(f"retry-{uuid.uuid4().hex[:6]}", [v1_role(
        "w", 1, f"if [ -f {marker} ]; then echo second; else touch {marker}; echo first; exit 1; fi")], retryCount=1))
    assert c.wait_state(key, TERMINAL)["jobStatus"]["state"] == "SUCCEEDED"
    status, attempts = c.raw("GET", f"/api/v2/jobs/{key}/attempts")
    assert status == 200
    ids = [a["attemptId"] for a in attempts if a["role"] == "w"]
    assert len(ids) == 2
    assert c.log(key, "w", 0) == "second\n"
    assert c.api.task_log(key, "w", 0, "stdout", attempt=ids[0]) == "first\n"
    status, body = c.raw("GET", f"/api/v2/jobs/{key}/tasks/w/0/logs/stdout?attempt=nope")
    assert status == 404 and body["code"] == "NoTaskLogError"
