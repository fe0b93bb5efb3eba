"""The agent's Prometheus metrics (``GET /metrics`` on its log server, as OpenPAI's job-exporter on every node).

Per GPU: utilization, memory, temperature (NVML where present; a node without it reports only what it is
configured with), ECC errors and health; which task holds it. Per task: CPU time and resident memory, with
OpenPAI-like labels (``username, job_name, role_name, task_index, virtual_cluster, node``). Read at scrape
time, from NVML and the runtime; nothing is kept between scrapes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pai.nodeagent.epoch import EpochMark
from pai.nodeagent.resources import GpuSample, NodeResources
from pai.nodeagent.runtime import Runtime, TaskUsage
from pai.protocol import GpuHealth

TASK_LABELS = ["username", "job_name", "role_name", "task_index", "virtual_cluster", "node"]
GPU_LABELS = ["node", "minor_number"]


class NodeMetrics:
    def __init__(self, node: str, resources: NodeResources, runtime: Runtime, work_dir: Path,
                 disk_failures: Callable[[], dict[tuple[str, str], int]] | None = None,
                 epochs: EpochMark | None = None, master: Callable[[], str] | None = None) -> None:
        self.node = node
        self.resources = resources
        self.runtime = runtime
        self.work_dir = work_dir  # its disk holds the code, the logs and the tasks' work directories
        self.disk_failures = disk_failures  # (what, errno) -> writes that failed for want of disk (diskguard.py)
        self.epochs = epochs  # the master's epoch seen, and the commands of deposed leaders refused (epoch.py)
        self.master = master  # the master the agent talks to now (masters.py)

    async def render(self) -> bytes:
        tasks = await self.runtime.usage()
        registry = CollectorRegistry()
        registry.register(_Scrape(self.node, self.resources.gpu_samples(), self.resources.gpu_health(), tasks))
        failures = self.disk_failures() if self.disk_failures is not None else {}
        registry.register(_Disk(self.node, self.work_dir, dict(failures)))
        if self.epochs is not None:
            registry.register(_Fencing(self.node, self.epochs.highest, dict(self.epochs.refused)))
        if self.master is not None:
            registry.register(_Master(self.node, self.master()))
        return generate_latest(registry)


class _Master(Collector):
    def __init__(self, node: str, url: str) -> None:
        self.node, self.url = node, url

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("pai_node_master_info", "1 for the master this agent talks to now (it follows "
                                   "the leader among the masters it was given)", labels=["node", "url"])
        family.add_metric([self.node, self.url], 1)
        yield family


class _Fencing(Collector):
    def __init__(self, node: str, highest: int, refused: dict[str, int]) -> None:
        self.node, self.highest, self.refused = node, highest, refused

    def collect(self) -> Iterator[Metric]:
        epoch = GaugeMetricFamily("pai_node_master_epoch", "The highest epoch of the master's launcher this agent "
                                  "has seen (0: none holds a lease)", labels=["node"])
        epoch.add_metric([self.node], self.highest)
        refused = CounterMetricFamily("pai_node_refused_commands", "Commands of a deposed master (an epoch lower "
                                      "than the highest seen) the agent refused, since it started",
                                      labels=["node", "type"])
        for kind, count in sorted(self.refused.items()):
            refused.add_metric([self.node, kind], count)
        yield from (epoch, refused)


class _Disk(Collector):
    def __init__(self, node: str, path: Path, failures: dict[tuple[str, str], int] | None = None) -> None:
        self.node, self.path, self.failures = node, path, failures or {}

    def collect(self) -> Iterator[Metric]:
        failed = CounterMetricFamily("pai_node_disk_write_failures", "Writes of the agent to its work directory "
                                     "that failed for want of disk (ENOSPC, EDQUOT, EROFS)",
                                     labels=["node", "what", "errno"])
        for (what, errno), count in sorted(self.failures.items()):
            failed.add_metric([self.node, what, errno], count)
        yield failed
        try:
            usage = shutil.disk_usage(self.path)
        except OSError:
            return
        figures = (("pai_node_disk_free_bytes", "Free space of the agent's work directory's disk", usage.free),
                   ("pai_node_disk_size_bytes", "Size of the agent's work directory's disk", usage.total))
        for name, doc, value in figures:
            family = GaugeMetricFamily(name, doc, labels=["node", "path"])
            family.add_metric([self.node, str(self.path)], value)
            yield family


def task_labels(u: TaskUsage, node: str) -> list[str]:
    user, _, job = u.record.job_key.partition("~")
    return [user, job, u.record.role, str(u.record.index), u.record.vc, node]


class _Scrape(Collector):
    def __init__(self, node: str, samples: tuple[GpuSample, ...], health: tuple[GpuHealth, ...],
                 tasks: list[TaskUsage]) -> None:
        self.node, self.samples, self.health, self.tasks = node, samples, health, tasks

    def collect(self) -> Iterator[Metric]:
        yield from self._gpus()
        cpu = CounterMetricFamily("pai_task_cpu_seconds", "CPU time of a task's processes", labels=TASK_LABELS)
        memory = GaugeMetricFamily("pai_task_memory_bytes", "Resident memory of a task", labels=TASK_LABELS)
        held = GaugeMetricFamily("pai_task_gpu_allocated", "1 for each GPU a task holds",
                                 labels=[*TASK_LABELS, "minor_number"])
        util = GaugeMetricFamily("pai_task_gpu_utilization_percent", "Utilization of a GPU a task holds (NVML)",
                                 labels=[*TASK_LABELS, "minor_number"])
        by_index = {s.index: s for s in self.samples}
        for u in self.tasks:
            labels = task_labels(u, self.node)
            cpu.add_metric(labels, u.cpu_seconds)
            memory.add_metric(labels, u.memory_bytes)
            for gpu in u.record.gpus:
                held.add_metric([*labels, str(gpu)], 1)
                sample = by_index.get(gpu)
                if sample is not None and sample.utilization is not None:
                    util.add_metric([*labels, str(gpu)], sample.utilization)
        yield from (cpu, memory, held, util)

    def _gpus(self) -> Iterator[Metric]:
        healthy = GaugeMetricFamily("pai_gpu_healthy", "1 when the GPU answers and has no uncorrected ECC error",
                                    labels=GPU_LABELS)
        ecc = GaugeMetricFamily("pai_gpu_ecc_errors", "Uncorrected volatile ECC errors", labels=GPU_LABELS)
        for h in self.health:
            healthy.add_metric([self.node, str(h.index)], 1 if h.healthy else 0)
            ecc.add_metric([self.node, str(h.index)], h.ecc_errors)
        yield from (healthy, ecc)
        figures = (("pai_gpu_utilization_percent", "GPU utilization (NVML)", "utilization"),
                   ("pai_gpu_memory_used_bytes", "GPU memory used (NVML)", "memory_used"),
                   ("pai_gpu_memory_total_bytes", "GPU memory (NVML)", "memory_total"),
                   ("pai_gpu_temperature_celsius", "GPU temperature (NVML)", "temperature"))
        for name, doc, attr in figures:
            family = GaugeMetricFamily(name, doc, labels=GPU_LABELS)
            for s in self.samples:
                if (v := getattr(s, attr)) is not None:
                    family.add_metric([self.node, str(s.index)], v)
            yield family
