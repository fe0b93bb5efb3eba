"""``pai vc replay --from-master``: the replay starts from a real master's nodes, VCs and active jobs, read over
its REST API by the CLI, and runs the trace on top of them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.main import cli
from tests.eventually import eventually
from tests.rest_server.conftest import AGENT_TOKEN, Api


def v1_job(name: str, gpu: int) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 2, "memoryMB": 1024, "gpuNumber": gpu, "command": "true"}]})


async def state_of(api: Api, key: str) -> str:
    _, detail = await api.call("GET", f"/api/v2/jobs/{key}")
    return str(detail["jobStatus"]["state"])


async def replay(api: Api, tmp_path: Path, *args: str) -> Result:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"name": "traced", "submittedAt": 0, "duration": 50,
                                 "tasks": [{"gpu": 8, "cpu": 2, "memoryMB": 1024}]}) + "\n")
    url = str(api.client.make_url("/"))
    env = {"PAI_TOKEN": api.token or "", "PAI_CONFIG": str(tmp_path / "cli.json")}
    argv = ["vc", "replay", str(trace), "--from-master", url, "--live-duration", "100", *args]
    # the CLI's HTTP client blocks: it runs on a thread while this loop serves the master
    return await asyncio.to_thread(CliRunner().invoke, cli, argv, env=env, catch_exceptions=False)


@pytest.fixture
async def busy_master(api: Api) -> Api:
    """One 8-GPU node, a job running on it and a job waiting behind it."""
    reg = {"version": 1, "node": {"name": "n1", "address": "127.0.0.9",
                                  "resources": {"gpu": 8, "cpu": 16, "memoryMB": 65536}}}
    status, _ = await api.call("POST", "/api/internal/agents/register", json_body=reg, token=AGENT_TOKEN)
    assert status == 200
    await api.call("POST", "/api/v2/jobs", body=v1_job("running", 8), content_type="application/json")
    await eventually(lambda: _is(api, "admin~running", "RUNNING"), what="the first job to run")
    await api.call("POST", "/api/v2/jobs", body=v1_job("waiting", 8), content_type="application/json")
    await asyncio.sleep(0.2)  # a few passes: it stays waiting, the node is full
    assert await state_of(api, "admin~waiting") == "WAITING"
    return api


async def _is(api: Api, key: str, state: str) -> bool:
    return await state_of(api, key) == state


async def test_the_trace_runs_on_top_of_the_live_jobs(busy_master: Api, tmp_path: Path) -> None:
    result = await replay(busy_master, tmp_path, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["jobs"], out["liveJobs"]) == (1, 2)
    (figures,) = out["configurations"]
    assert figures["name"].endswith("(live)") and figures["capacityGpus"] == 8
    # The running job holds the node for its assumed 100 s; then the waiting job (submitted before the replay
    # began) runs 100 s; the traced job starts at 200 and ends at 250.
    assert figures["spanSeconds"] == 250 and figures["utilization"] == pytest.approx(1.0)
    overall = figures["overall"]
    assert (overall["jobs"], overall["completed"], overall["preemptions"]) == (2, 2, 0)  # the running job: not counted
    assert overall["queueingSeconds"]["p99"] == 200 and overall["completionSeconds"]["p99"] == 250
    assert list(figures["vcs"]) == ["default"]


async def test_a_what_if_configuration_replaces_the_live_vcs(busy_master: Api, tmp_path: Path) -> None:
    config = tmp_path / "what-if.yaml"
    config.write_text("virtualClusters:\n  - {name: research}\n")  # `default` added: it holds the whole cluster
    result = await replay(busy_master, tmp_path, "--config", str(config))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "replay of trace.jsonl: 1 job, on top of 1 running and 1 waiting live jobs"
    assert lines[1].split() == ["what-if.yaml"]
    assert any(line.split() == ["VC", "research", "jobs", "0"] for line in lines)


async def test_a_configuration_may_not_replace_the_live_nodes(busy_master: Api, tmp_path: Path) -> None:
    config = tmp_path / "bigger.yaml"
    config.write_text("nodes: [{name: extra, gpu: 8, cpu: 16, memoryMB: 65536}]\n")
    result = await replay(busy_master, tmp_path, "--config", str(config))
    assert result.exit_code == 1 and "the nodes are the live cluster's" in result.output
