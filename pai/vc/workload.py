"""Synthetic workloads shaped like Microsoft's Philly GPU clusters, for ``pai vc replay``.

The shape follows the published characterisation in Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU
Clusters for DNN Training Workloads", USENIX ATC 2019 (https://www.usenix.org/conference/atc19/presentation/jeon):
most jobs ask for one GPU, multi-GPU jobs are a minority and jobs of more than 8 GPUs a few percent; run times
span minutes to days with a long tail, larger jobs running longer (its Figure 2 plots run times for 1, 2-4, 5-8
and >8 GPU jobs). The numbers below are our approximations read from the paper's figures and text, not fitted
to the released trace:

=========  ========  =====================
GPUs       share     median run time
=========  ========  =====================
1          70 %      15 min
2          10 %      30 min
4          9 %       30 min
8          7 %       60 min
16         2.5 %     2 h
32         1 %       2 h
64         0.5 %     2 h
=========  ========  =====================

Run times are log-normal around those medians (sigma 1.8, so the mean is about 5 times the median and the
99th percentile about 65 times), clamped to 1 minute .. 7 days. Arrivals are Poisson with a diurnal rate,
``mean * (1 + 0.5 * cos(2 pi (hour - 14) / 24))`` (busiest at 14:00, a third as busy at 02:00), at the rate
that offers ``load`` times the cluster's GPUs (the expected GPU-seconds of a job come from the clamped
log-normal). Jobs go to VCs by share, to users of a VC by a Zipf law (user k gets weight 1/k), and take
priority ``prod`` 10 %, ``test`` 80 %, ``oppo`` 10 % (the paper has no priorities: our choice). A job of more
GPUs than a node has is a gang of whole-node tasks. Deterministic for a seed.

``elastic_share`` of the jobs (drawn apart, so the other draws do not change with it) are elastic data-parallel
jobs: a job of ``g`` GPUs is ``n`` workers of 1 GPU (of a whole node's GPUs when ``g`` is more than a node has),
elastic from ``max(1, n // 2)`` to ``2 n`` workers; its duration is its run time at ``n`` (our choice: the Philly
paper has no elastic jobs).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from itertools import accumulate

from pai.domain.resources import Resources
from pai.vc.quota import cluster_total
from pai.vc.snapshot import ElasticRole, NodeView, TaskRequest
from pai.vc.trace import Trace, TraceJob

DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class SizeClass:
    gpus: int
    share: float  # fraction of jobs
    median_minutes: float  # median run time


PHILLY_SIZES = (
    SizeClass(1, 0.70, 15), SizeClass(2, 0.10, 30), SizeClass(4, 0.09, 30), SizeClass(8, 0.07, 60),
    SizeClass(16, 0.025, 120), SizeClass(32, 0.010, 120), SizeClass(64, 0.005, 120),
)


@dataclass(frozen=True, slots=True)
class WorkloadShape:
    days: float = 7.0
    load: float = 0.9  # offered GPU-time as a fraction of the cluster's GPU-time
    sizes: tuple[SizeClass, ...] = PHILLY_SIZES
    sigma: float = 1.8  # of the log-normal run times
    min_seconds: float = 60.0
    max_seconds: float = 7 * DAY
    diurnal_amplitude: float = 0.5
    peak_hour: float = 14.0
    vcs: tuple[tuple[str, float], ...] = (("research", 0.4), ("prod", 0.3), ("dev", 0.2), ("default", 0.1))
    users_per_vc: int = 20
    priorities: tuple[tuple[int, float], ...] = ((100, 0.1), (10, 0.8), (-1, 0.1))
    gpus_per_node: int = 8  # larger jobs are gangs of tasks of this many GPUs
    cpu_per_gpu: int = 6
    memory_mb_per_gpu: int = 48_000
    elastic_share: float = 0.0  # of the jobs, elastic from half to twice their size (in workers)

    def mean_seconds(self, size: SizeClass) -> float:
        """The expected run time of a job of ``size``: the mean of the clamped log-normal."""
        mu, s = math.log(size.median_minutes * 60), self.sigma
        lo, hi = (math.log(self.min_seconds) - mu) / s, (math.log(self.max_seconds) - mu) / s
        inside = math.exp(mu + s * s / 2) * (_phi(hi - s) - _phi(lo - s))
        return self.min_seconds * _phi(lo) + self.max_seconds * (1 - _phi(hi)) + inside

    def gpu_seconds_per_job(self) -> float:
        return sum(c.share * c.gpus * self.mean_seconds(c) for c in self.sizes) / sum(c.share for c in self.sizes)

    def arrivals_per_second(self, cluster_gpus: int) -> float:
        """The mean arrival rate that offers ``load`` of ``cluster_gpus``."""
        return self.load * cluster_gpus / self.gpu_seconds_per_job()


def _phi(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def generate(shape: WorkloadShape, nodes: tuple[NodeView, ...], seed: int = 1) -> Trace:
    """A trace of ``shape.days`` on ``nodes``; the same seed gives the same trace."""
    rnd = random.Random(seed)
    elastic_rnd = random.Random(f"elastic-{seed}")  # its own draws: the trace is the same job for job but elastic
    mean_rate = shape.arrivals_per_second(cluster_total(nodes).gpu)
    peak_rate = mean_rate * (1 + shape.diurnal_amplitude)
    size_weights = list(accumulate(c.share for c in shape.sizes))
    vc_weights = list(accumulate(w for _, w in shape.vcs))
    prio_weights = list(accumulate(w for _, w in shape.priorities))
    user_weights = list(accumulate(1 / k for k in range(1, shape.users_per_vc + 1)))
    jobs: list[TraceJob] = []
    t, end = 0.0, shape.days * DAY
    while peak_rate > 0:
        t += rnd.expovariate(peak_rate)
        if t >= end:
            break
        if rnd.random() * peak_rate > _rate(shape, mean_rate, t):
            continue  # thinning: fewer arrivals off-peak
        size = rnd.choices(shape.sizes, cum_weights=size_weights)[0]
        vc = rnd.choices(shape.vcs, cum_weights=vc_weights)[0][0]
        user = rnd.choices(range(1, shape.users_per_vc + 1), cum_weights=user_weights)[0]
        duration = rnd.lognormvariate(math.log(size.median_minutes * 60), shape.sigma)
        elastic = elastic_rnd.random() < shape.elastic_share
        tasks = _workers(shape, size.gpus) if elastic else _tasks(shape, size.gpus)
        jobs.append(TraceJob(
            name=f"j{len(jobs) + 1:06d}", submitted_at=round(t, 3),
            duration=round(min(max(duration, shape.min_seconds), shape.max_seconds), 3),
            tasks=tasks, vc=vc, user=f"{vc}-u{user}",
            priority=rnd.choices(shape.priorities, cum_weights=prio_weights)[0][0],
            elastic=(ElasticRole("main", max(1, len(tasks) // 2), 2 * len(tasks)),) if elastic else ()))
    header = {"generator": {"model": "philly-atc19", "seed": seed, **_settings(shape)}}
    return Trace(tuple(jobs), nodes, header)


def _rate(shape: WorkloadShape, mean_rate: float, t: float) -> float:
    hour = (t % DAY) / 3600
    return mean_rate * (1 + shape.diurnal_amplitude * math.cos(2 * math.pi * (hour - shape.peak_hour) / 24))


def _tasks(shape: WorkloadShape, gpus: int) -> tuple[TaskRequest, ...]:
    per = min(gpus, shape.gpus_per_node)
    count = math.ceil(gpus / per)
    out = []
    for i in range(count):
        g = min(per, gpus - i * per)
        out.append(TaskRequest("main", i, Resources(g, g * shape.cpu_per_gpu, g * shape.memory_mb_per_gpu)))
    return tuple(out)


def _workers(shape: WorkloadShape, gpus: int) -> tuple[TaskRequest, ...]:
    """An elastic job's tasks: workers of 1 GPU, or of a whole node's GPUs when the job is larger than a node."""
    per = 1 if gpus <= shape.gpus_per_node else shape.gpus_per_node
    r = Resources(per, per * shape.cpu_per_gpu, per * shape.memory_mb_per_gpu)
    return tuple(TaskRequest("main", i, r) for i in range(math.ceil(gpus / per)))


def _settings(shape: WorkloadShape) -> dict[str, object]:
    """The shape as written in the trace's header (camelCase, like every other document)."""
    return {
        "days": shape.days, "load": shape.load, "sigma": shape.sigma, "minSeconds": shape.min_seconds,
        "maxSeconds": shape.max_seconds, "diurnalAmplitude": shape.diurnal_amplitude, "peakHour": shape.peak_hour,
        "sizes": [{"gpus": c.gpus, "share": c.share, "medianMinutes": c.median_minutes} for c in shape.sizes],
        "vcs": dict(shape.vcs), "usersPerVc": shape.users_per_vc,
        "priorities": {str(p): w for p, w in shape.priorities}, "gpusPerNode": shape.gpus_per_node,
        "cpuPerGpu": shape.cpu_per_gpu, "memoryMBPerGpu": shape.memory_mb_per_gpu,
        **({"elasticShare": shape.elastic_share} if shape.elastic_share else {}),
    }
