"""What this node has: CPUs, memory, GPUs (NVML when present: count, model, memory) and the health of every GPU.

Command-line flags override detection. ``pynvml`` (``nvidia-ml-py``) is a declared dependency and always
importable; it loads the driver's library only in ``nvmlInit()``, which fails on a machine without an NVIDIA
driver: such a node has the GPUs it is configured with, all reported healthy.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pynvml

from pai.domain.resources import Resources
from pai.protocol import GpuHealth

log = logging.getLogger(__name__)
Log = logging.Logger | logging.LoggerAdapter[logging.Logger]

# nvmlDeviceGetTotalEccErrors(handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC)
_UNCORRECTED = 1
_VOLATILE = 0


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def parse_meminfo_mb(text: str) -> int:
    """MemTotal of a /proc/meminfo text, in MB (0 when absent)."""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            kb = int(fields[1])
            unit = fields[2].lower() if len(fields) > 2 else "kb"
            return kb // 1024 if unit == "kb" else kb // (1024 * 1024)
    return 0


def memory_mb(meminfo: Path = Path("/proc/meminfo")) -> int:
    try:
        return parse_meminfo_mb(meminfo.read_text())
    except OSError:
        return 0


class Nvml:
    """A thin shell over pynvml; every call returns None/[] instead of raising when NVML is missing."""

    def __init__(self, module: ModuleType | None) -> None:
        self._nvml: Any = module

    @classmethod
    def load(cls, logger: Log = log) -> Nvml:
        try:
            pynvml.nvmlInit()
        except Exception as e:  # no driver, no device: a CPU node
            logger.info("NVML not available: using the configured GPU count", extra={"error": str(e)})
            return cls(None)
        return cls(pynvml)

    @property
    def available(self) -> bool:
        return self._nvml is not None

    def device_count(self) -> int | None:
        if self._nvml is None:
            return None
        try:
            return int(self._nvml.nvmlDeviceGetCount())
        except Exception:
            return None

    def gpu_type(self) -> str | None:
        if self._nvml is None:
            return None
        try:
            name = self._nvml.nvmlDeviceGetName(self._nvml.nvmlDeviceGetHandleByIndex(0))
        except Exception:
            return None
        return name.decode() if isinstance(name, bytes) else str(name)

    def gpu_memory_mb(self) -> int:
        """The memory of GPU 0 in MB (a node's GPUs are one model); 0 when unknown."""
        if self._nvml is None:
            return 0
        try:
            info = self._nvml.nvmlDeviceGetMemoryInfo(self._nvml.nvmlDeviceGetHandleByIndex(0))
        except Exception:
            return 0
        return int(info.total) // (1024 * 1024)

    def samples(self, count: int) -> tuple[GpuSample, ...]:
        if self._nvml is None:
            return ()
        return tuple(s for i in range(count) if (s := sample_gpu(self._nvml, i)) is not None)

    def health(self, index: int) -> GpuHealth:
        if self._nvml is None:
            return GpuHealth(index)
        try:
            handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # the device fell off the bus
            return GpuHealth(index, healthy=False)
        try:
            ecc = int(self._nvml.nvmlDeviceGetTotalEccErrors(handle, _UNCORRECTED, _VOLATILE))
        except Exception:  # ECC not supported on this board
            ecc = 0
        return GpuHealth(index, healthy=ecc == 0, ecc_errors=ecc)


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU now, as NVML reads it (the agent's /metrics); a figure NVML cannot give is None."""

    index: int
    utilization: float | None  # percent of the last sample period a kernel ran
    memory_used: int | None  # bytes
    memory_total: int | None
    temperature: float | None  # degrees Celsius


def sample_gpu(nvml: Any, index: int) -> GpuSample | None:
    """``nvml``: the pynvml module (the driver loaded); None when the device does not answer."""
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None

    def read(fn: str, *args: object) -> Any:
        try:
            return getattr(nvml, fn)(handle, *args)
        except Exception:  # a figure this board does not give
            return None

    util, memory = read("nvmlDeviceGetUtilizationRates"), read("nvmlDeviceGetMemoryInfo")
    temperature = read("nvmlDeviceGetTemperature", 0)  # NVML_TEMPERATURE_GPU
    return GpuSample(index, None if util is None else float(util.gpu), None if memory is None else int(memory.used),
                     None if memory is None else int(memory.total), None if temperature is None else float(temperature))


@dataclass(frozen=True, slots=True)
class NodeResources:
    total: Resources
    gpu_type: str | None
    nvml: Nvml
    gpu_memory_mb: int = 0  # per GPU, from NVML

    def gpu_health(self) -> tuple[GpuHealth, ...]:
        return tuple(self.nvml.health(i) for i in range(self.total.gpu))

    def gpu_samples(self) -> tuple[GpuSample, ...]:
        """Utilization, memory and temperature of every GPU NVML answers for (none without NVML)."""
        return self.nvml.samples(self.total.gpu)


def detect(
    *,
    gpus: int | None = None,
    cpus: int | None = None,
    memory: int | None = None,
    gpu_type: str | None = None,
    nvml: Nvml | None = None,
    logger: Log = log,
) -> NodeResources:
    """The node's resources: each given value wins over what is detected."""
    nvml = nvml if nvml is not None else Nvml.load(logger)
    gpu_count = gpus if gpus is not None else (nvml.device_count() or 0)
    total = Resources(
        gpu=gpu_count,
        cpu=cpus if cpus is not None else cpu_count(),
        memory_mb=memory if memory is not None else memory_mb(),
    )
    return NodeResources(total, gpu_type or (nvml.gpu_type() if gpu_count else None), nvml,
                         nvml.gpu_memory_mb() if gpu_count else 0)
