"""The node's health, as the agent reports it with every heartbeat: problems in words, none when healthy.

Checked every few seconds (off the event loop): the free space of the work directory, and, for the docker
runtime, that the Docker Engine answers. GPU health travels separately (NVML, per GPU). The master places
nothing new on a node that reports a problem and shows why in ``GET /api/v2/nodes`` and ``pai nodes``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MIN_FREE_DISK_MB = 1024


@dataclass(frozen=True, slots=True)
class HealthCheck:
    work_dir: Path
    min_free_disk_mb: int = DEFAULT_MIN_FREE_DISK_MB
    engine: Callable[[], str | None] | None = None  # why the container engine does not answer, or None

    def problems(self) -> tuple[str, ...]:
        found = []
        try:
            free_mb = shutil.disk_usage(self.work_dir).free >> 20
            if free_mb < self.min_free_disk_mb:
                found.append(f"work directory {self.work_dir}: {free_mb} MB free, below {self.min_free_disk_mb} MB")
        except OSError as e:
            found.append(f"work directory {self.work_dir}: cannot be read: {e.strerror}")
        if self.engine is not None:
            why_not = self.engine()
            if why_not is not None:
                found.append(f"the Docker Engine does not answer: {why_not}")
        return tuple(found)
