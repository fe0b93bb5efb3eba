"""The agent's watch over its attempts' logs: each attempt within its share of the disk (``logcap.py``).

Every ``interval`` seconds, off the event loop: the log files of every running attempt, and once more of every
attempt that ended since the last pass (what it wrote last is capped too), rotate past their cap. One INFO line
per attempt the first time its logs go over the cap; a write that fails for want of disk goes to the guard
(one WARNING line per kind, the node reported unhealthy); no failure ends the watch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from pai.nodeagent import logcap
from pai.nodeagent.diskguard import DiskGuard
from pai.nodeagent.logfmt import BoundLogger
from pai.nodeagent.paths import AgentPaths, LogStream, is_attempt_id
from pai.protocol import ContainerReport, ContainerStatus


class LogWatch:
    def __init__(self, paths: AgentPaths, reports: Callable[[], Iterable[ContainerReport]], disk: DiskGuard,
                 log: BoundLogger, *, max_file_bytes: int, max_task_bytes: int) -> None:
        self.paths = paths
        self.reports = reports
        self.disk = disk
        self.log = log
        self.cap = logcap.file_cap(max_file_bytes, max_task_bytes, len(LogStream))
        self.max_task_bytes = max_task_bytes
        self._running: set[str] = set()  # the attempts that ran at the last pass
        self._told: set[str] = set()  # the attempts whose first rotation was logged

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.check()
            except Exception:  # a bug here must not end the watch: the logs would grow without a cap
                self.log.exception("log cap pass failed")

    async def check(self) -> logcap.Capped:
        running = {r.attempt_id for r in self.reports() if r.status is ContainerStatus.RUNNING}
        attempts = sorted(a for a in running | self._running if is_attempt_id(a))
        self._running = running
        files = [self.paths.log_file(a, stream) for a in attempts for stream in LogStream]
        done = await asyncio.to_thread(logcap.cap, files, self.cap)
        for path, error in done.errors:
            if not self.disk.failed("a task's log", error, file=str(path)):
                self.log.warning("log cap failed", extra={"file": str(path), "error": str(error)})
        for attempt in sorted({p.parent.name for p in done.rotated} - self._told):
            self._told.add(attempt)
            self.log.info("task logs over their share: older output dropped", extra={
                "attempt": attempt, "file_cap_mb": round(self.cap / (1 << 20), 2),
                "task_share_mb": round(self.max_task_bytes / (1 << 20), 2)})
        self._told &= set(attempts)
        return done
