"""The Philly-shaped workload generator: for a fixed seed its trace follows the parameters it declares."""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter

import pytest

from pai.vc.trace import Trace, parse_trace, trace_lines
from pai.vc.workload import DAY, PHILLY_SIZES, SizeClass, WorkloadShape, generate
from tests.vc.vc_builders import nodes

SHAPE = WorkloadShape(days=7)
CLUSTER = tuple(nodes(125, 8, 64, 512_000))  # 1,000 GPUs


@pytest.fixture(scope="module")
def trace() -> Trace:
    return generate(SHAPE, CLUSTER, seed=11)


def test_the_declared_sizes_are_philly_like() -> None:
    """The parameters themselves: 1-GPU jobs the large majority, >8 GPUs a few percent, shares sum to 1."""
    shares = {c.gpus: c.share for c in PHILLY_SIZES}
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares[1] >= 0.6
    assert 0.02 <= sum(s for g, s in shares.items() if g > 8) <= 0.06


def test_job_sizes_follow_their_shares(trace: Trace) -> None:
    counts = Counter(j.gpus for j in trace.jobs)
    n = len(trace.jobs)
    for c in SHAPE.sizes:
        assert counts[c.gpus] / n == pytest.approx(c.share, abs=0.015), c


def test_arrivals_come_at_the_rate_that_offers_the_load(trace: Trace) -> None:
    expected = SHAPE.arrivals_per_second(1000) * SHAPE.days * DAY
    assert len(trace.jobs) == pytest.approx(expected, rel=0.04)  # Poisson: sd ~ 1 %
    offered = sum(j.gpus * j.duration for j in trace.jobs) / (1000 * SHAPE.days * DAY)
    assert offered == pytest.approx(SHAPE.load, rel=0.3)  # heavy tails: the sum is noisy; the mean is checked below


def test_the_expected_gpu_seconds_per_job_matches_sampling() -> None:
    """``mean_seconds`` (the clamped log-normal's mean, in closed form) against the generator's own draw."""
    rnd = random.Random(5)
    for c in (SizeClass(1, 1, 15), SizeClass(8, 1, 60), SizeClass(1, 1, 60 * 24 * 3)):  # the last one hits the clamp
        draws = [min(max(rnd.lognormvariate(math.log(c.median_minutes * 60), SHAPE.sigma), SHAPE.min_seconds),
                     SHAPE.max_seconds) for _ in range(200_000)]
        assert statistics.fmean(draws) == pytest.approx(SHAPE.mean_seconds(c), rel=0.05), c


def test_durations_are_heavy_tailed_around_the_declared_medians(trace: Trace) -> None:
    by_size: dict[int, list[float]] = {}
    for j in trace.jobs:
        by_size.setdefault(j.gpus, []).append(j.duration)
    for c in SHAPE.sizes:
        if len(by_size[c.gpus]) >= 500:
            assert statistics.median(by_size[c.gpus]) == pytest.approx(c.median_minutes * 60, rel=0.2), c
    ones = sorted(by_size[1])
    assert statistics.fmean(ones) > 3 * statistics.median(ones)  # a long tail: the mean far above the median
    assert ones[int(0.99 * len(ones))] > 12 * 3600  # some run for many hours
    assert min(j.duration for j in trace.jobs) >= SHAPE.min_seconds
    assert max(j.duration for j in trace.jobs) <= SHAPE.max_seconds


def test_arrivals_follow_the_day(trace: Trace) -> None:
    """Busiest around 14:00: the 12 hours around the peak get about twice the arrivals of the other 12."""
    peak = sum(1 for j in trace.jobs if 8 <= (j.submitted_at % DAY) / 3600 < 20)
    ratio = peak / (len(trace.jobs) - peak)
    expected = (12 + 24 / math.pi * SHAPE.diurnal_amplitude) / (12 - 24 / math.pi * SHAPE.diurnal_amplitude)
    assert ratio == pytest.approx(expected, rel=0.1)


def test_vcs_users_and_priorities_follow_their_weights(trace: Trace) -> None:
    n = len(trace.jobs)
    vcs = Counter(j.vc for j in trace.jobs)
    for name, share in SHAPE.vcs:
        assert vcs[name] / n == pytest.approx(share, abs=0.02)
    priorities = Counter(j.priority for j in trace.jobs)
    for p, share in SHAPE.priorities:
        assert priorities[p] / n == pytest.approx(share, abs=0.02)
    users = Counter(j.user for j in trace.jobs if j.vc == "research")
    assert users.most_common(1)[0][0] == "research-u1"  # Zipf: the first user submits the most
    assert users["research-u1"] > 5 * users["research-u20"]


def test_big_jobs_are_gangs_of_whole_node_tasks(trace: Trace) -> None:
    for j in trace.jobs:
        assert all(t.resources.gpu <= 8 for t in j.tasks)
        assert j.gpus <= 8 or (len(j.tasks) == j.gpus // 8 and all(t.resources.gpu == 8 for t in j.tasks))
        t = j.tasks[0]
        assert (t.resources.cpu, t.resources.memory_mb) == (6 * t.resources.gpu, 48_000 * t.resources.gpu)


def test_the_same_seed_gives_the_same_trace_and_it_survives_writing(trace: Trace) -> None:
    short = WorkloadShape(days=0.5)
    once, again = generate(short, CLUSTER, seed=3), generate(short, CLUSTER, seed=3)
    assert once == again
    assert generate(short, CLUSTER, seed=4).jobs != once.jobs
    read = parse_trace(list(trace_lines(once)))
    assert (read.jobs, read.nodes) == (once.jobs, once.nodes)
    assert read.header["generator"]["seed"] == 3 and read.header["generator"]["model"] == "philly-atc19"
