"""Node resource detection: flags win, /proc is read, NVML is optional."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest

from pai.nodeagent.resources import Nvml, detect, parse_meminfo_mb
from pai.protocol import GpuHealth


@pytest.mark.parametrize(
    ("text", "mb"),
    [
        pytest.param("MemTotal:       16384000 kB\nMemFree: 1 kB\n", 16000, id="kb"),
        pytest.param("MemFree: 1 kB\n", 0, id="absent"),
    ],
)
def test_parse_meminfo(text: str, mb: int) -> None:
    assert parse_meminfo_mb(text) == mb


def test_detects_this_machine_without_nvml() -> None:
    res = detect(nvml=Nvml(None))
    assert res.total.cpu == len(os.sched_getaffinity(0))
    assert res.total.memory_mb > 0
    assert (res.total.gpu, res.gpu_type, res.gpu_memory_mb) == (0, None, 0)
    assert res.gpu_health() == ()


def test_flags_override_detection() -> None:
    res = detect(gpus=4, cpus=16, memory=2048, gpu_type="A100", nvml=Nvml(None))
    assert (res.total.gpu, res.total.cpu, res.total.memory_mb, res.gpu_type) == (4, 16, 2048, "A100")
    assert res.gpu_health() == tuple(GpuHealth(i) for i in range(4))


def fake_pynvml(ecc: dict[int, int], lost: set[int]) -> Any:
    """NVML cannot run on this machine: a stand-in with pynvml's function names."""

    def handle(index: int) -> int:
        if index in lost:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return index

    return SimpleNamespace(
        nvmlDeviceGetCount=lambda: 3,
        nvmlDeviceGetHandleByIndex=handle,
        nvmlDeviceGetName=lambda h: b"NVIDIA A100-SXM4-40GB",
        nvmlDeviceGetTotalEccErrors=lambda h, kind, counter: ecc.get(h, 0),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=40 * 1024**3, free=39 * 1024**3, used=1024**3),
    )


def test_nvml_counts_names_and_checks_every_gpu() -> None:
    res = detect(nvml=Nvml(fake_pynvml(ecc={1: 2}, lost={2})))
    assert (res.total.gpu, res.gpu_type, res.gpu_memory_mb) == (3, "NVIDIA A100-SXM4-40GB", 40960)
    assert res.gpu_health() == (GpuHealth(0), GpuHealth(1, False, 2), GpuHealth(2, False, 0))


def test_nvml_absent_here_loads_as_unavailable() -> None:
    assert not Nvml.load().available
