"""The node's health, as the agent reports it with every heartbeat: problems in words, none when healthy.

Checked every few seconds (off the event loop), and at once when a write of the agent fails for want of disk
(``diskguard.py``): the work directory's disk, and, for the docker runtime, that the Docker Engine answers. GPU
health travels separately (NVML, per GPU). Each problem starts with its kind (``pai.protocol.problems``):

- ``read-only``: the work directory's file system is mounted read-only, or a write met EROFS lately;
- ``disk full``: under 1 MB free, or a write met ENOSPC/EDQUOT lately;
- ``low disk``: less free than ``min_free_disk_mb``;
- ``disk unreadable``, ``engine down``.

The master places nothing new on a node that reports a problem and shows why in ``GET /api/v2/nodes``, ``pai
nodes``, the dashboard and its ``pai_node_problems`` metric.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pai.protocol.problems import ProblemKind, kind_of, problem

DEFAULT_MIN_FREE_DISK_MB = 1024
FULL_BELOW_MB = 1  # less free than this is a full disk, whatever --min-free-disk-mb says
DISK_KINDS = frozenset({ProblemKind.DISK_FULL, ProblemKind.READ_ONLY, ProblemKind.LOW_DISK,
                        ProblemKind.DISK_UNREADABLE})


@dataclass(frozen=True, slots=True)
class DiskError:
    """A write of the agent that failed for want of disk."""

    errno: int  # ENOSPC, EDQUOT or EROFS
    what: str  # what the agent was writing: "the lease", "attempt record", ...
    at: float  # time.monotonic()

    @property
    def read_only(self) -> bool:
        return self.errno == errno.EROFS


def disk_problem(work_dir: Path, min_free_mb: int, recent: DiskError | None = None) -> str | None:
    """The work directory's disk problem, with its figures, or None when it is fine. ``recent``: the last write
    that failed for want of disk, if lately."""
    try:
        st = os.statvfs(work_dir)
    except OSError as e:
        return problem(ProblemKind.DISK_UNREADABLE, f"work directory {work_dir} cannot be read: {e.strerror}")
    free_mb, total_mb = (st.f_bavail * st.f_frsize) >> 20, (st.f_blocks * st.f_frsize) >> 20
    figures = f"{free_mb} MB free of {total_mb} MB"
    failed = f" (a write failed lately: {os.strerror(recent.errno)})" if recent is not None else ""
    if st.f_flag & os.ST_RDONLY or (recent is not None and recent.read_only):
        return problem(ProblemKind.READ_ONLY, f"work directory {work_dir} is read-only ({figures}){failed}")
    if free_mb < FULL_BELOW_MB or recent is not None:
        return problem(ProblemKind.DISK_FULL, f"work directory {work_dir}: {figures}{failed}")
    if free_mb < min_free_mb:
        return problem(ProblemKind.LOW_DISK, f"work directory {work_dir}: {figures}, below {min_free_mb} MB")
    return None


def with_disk(problems: tuple[str, ...], disk: str | None) -> tuple[str, ...]:
    """``problems`` with its disk problem replaced by ``disk`` (first, when there is one)."""
    rest = tuple(p for p in problems if kind_of(p) not in DISK_KINDS)
    return (disk, *rest) if disk is not None else rest


def kinds(problems: tuple[str, ...]) -> frozenset[ProblemKind]:
    return frozenset(kind_of(p) for p in problems)


@dataclass(frozen=True, slots=True)
class HealthCheck:
    work_dir: Path
    min_free_disk_mb: int = DEFAULT_MIN_FREE_DISK_MB
    engine: Callable[[], str | None] | None = None  # why the container engine does not answer, or None
    recent: Callable[[], DiskError | None] | None = None  # the last write that failed for want of disk, lately

    def disk(self) -> str | None:
        return disk_problem(self.work_dir, self.min_free_disk_mb, self.recent() if self.recent else None)

    def problems(self) -> tuple[str, ...]:
        found = [p for p in (self.disk(),) if p is not None]
        if self.engine is not None:
            why_not = self.engine()
            if why_not is not None:
                found.append(problem(ProblemKind.ENGINE_DOWN, f"the Docker Engine does not answer: {why_not}"))
        return tuple(found)
