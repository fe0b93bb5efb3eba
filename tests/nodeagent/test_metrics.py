"""The agent's ``GET /metrics``: real tasks of the process runtime measured from /proc, GPUs as NVML reports them
(a stand-in module: NVML cannot run on this machine), scraped over HTTP and parsed with prometheus-client."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families

from pai.domain.resources import Resources
from pai.nodeagent.logserver import LogServer
from pai.nodeagent.metrics import NodeMetrics
from pai.nodeagent.paths import AgentPaths
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.nodeagent.resources import NodeResources, Nvml
from pai.protocol import ContainerStatus
from tests.eventually import eventually
from tests.nodeagent.builders import start_task, wait_status
from tests.nodeagent.test_resources import fake_pynvml

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
TASK = {"username": "alice", "job_name": "train", "role_name": "worker", "task_index": "1",
        "virtual_cluster": "dev", "node": "n1"}
BURN = "python3 -c 'import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass'; sleep 30"


async def scrape(server: LogServer) -> Samples:
    async with ClientSession() as http, http.get(f"http://127.0.0.1:{server.port}/metrics") as resp:
        assert resp.status == 200
        text = await resp.text()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


async def serve(tmp_path: Path, runtime: ProcessRuntime, nvml: Nvml, gpus: int = 2) -> LogServer:
    resources = NodeResources(Resources(gpus, 4, 4096), None, nvml)
    server = LogServer(AgentPaths(tmp_path / "work"), "127.0.0.1", 0, "token",
                       NodeMetrics("n1", resources, runtime, tmp_path).render)
    await server.start()
    return server


async def test_a_running_tasks_cpu_memory_and_gpus_are_labelled_as_openpai_does(
        runtime: ProcessRuntime, tmp_path: Path) -> None:
    server = await serve(tmp_path, runtime, Nvml(None))
    try:
        cmd = start_task("a1", BURN, job_key="alice~train", index=1, gpus=(1,), env={"PAI_VIRTUAL_CLUSTER": "dev"})
        await runtime.start(cmd, tmp_path / "a1")

        async def burnt() -> Samples | None:
            m = await scrape(server)
            return m if m.get(key("pai_task_cpu_seconds_total", **TASK), 0) >= 0.3 else None
        m = await eventually(burnt, what="the task's CPU time counted")
        assert m[key("pai_task_memory_bytes", **TASK)] > 1024 * 1024
        assert m[key("pai_task_gpu_allocated", **TASK, minor_number="1")] == 1
        assert key("pai_task_gpu_allocated", **TASK, minor_number="0") not in m
        assert [m[key("pai_gpu_healthy", node="n1", minor_number=i)] for i in "01"] == [1, 1]
        assert not [n for n, _ in m if n.startswith("pai_gpu_utilization")]  # without NVML: no figure, not a 0
        disk = {"node": "n1", "path": str(tmp_path)}
        assert 0 < m[key("pai_node_disk_free_bytes", **disk)] <= m[key("pai_node_disk_size_bytes", **disk)]

        await runtime.stop("a1", 0)
        await wait_status(runtime, "a1", ContainerStatus.EXITED)
        m = await scrape(server)
        assert not [n for n, _ in m if n.startswith("pai_task_")]  # an ended task is gone from the node's metrics
    finally:
        await server.close()


def nvml_with_figures() -> Any:
    fake = fake_pynvml(ecc={1: 3}, lost=set())
    fake.nvmlDeviceGetUtilizationRates = lambda h: SimpleNamespace(gpu=[87, 0, 5][h], memory=10)
    fake.nvmlDeviceGetTemperature = lambda h, sensor: [61, 40, 45][h]
    return fake


async def test_gpus_report_nvmls_utilization_memory_temperature_and_ecc(
        runtime: ProcessRuntime, tmp_path: Path) -> None:
    server = await serve(tmp_path, runtime, Nvml(nvml_with_figures()), gpus=3)
    try:
        cmd = start_task("a1", "sleep 30", job_key="alice~train", index=1, gpus=(0,),
                         env={"PAI_VIRTUAL_CLUSTER": "dev"})
        await runtime.start(cmd, tmp_path / "a1")
        m = await eventually(
            lambda: _with(scrape(server), key("pai_task_gpu_utilization_percent", **TASK, minor_number="0")),
            what="the task's GPU")
        gpu0 = {"node": "n1", "minor_number": "0"}
        assert m[key("pai_gpu_utilization_percent", **gpu0)] == 87
        assert m[key("pai_task_gpu_utilization_percent", **TASK, minor_number="0")] == 87
        assert m[key("pai_gpu_temperature_celsius", **gpu0)] == 61
        assert m[key("pai_gpu_memory_used_bytes", **gpu0)] == 1024**3
        assert m[key("pai_gpu_memory_total_bytes", **gpu0)] == 40 * 1024**3
        assert m[key("pai_gpu_ecc_errors", node="n1", minor_number="1")] == 3
        assert m[key("pai_gpu_healthy", node="n1", minor_number="1")] == 0
        assert m[key("pai_gpu_healthy", **gpu0)] == 1
    finally:
        await runtime.stop("a1", 0)
        await server.close()


async def _with(scraping: Any, wanted: tuple[str, frozenset[tuple[str, str]]]) -> Samples | None:
    m: Samples = await scraping
    return m if wanted in m else None
