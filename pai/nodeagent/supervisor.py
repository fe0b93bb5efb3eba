"""The attempts of this node: prepares them (code), hands them to the runtime, reports and forgets them.

Commands are idempotent: a start for an attempt it already has and a stop for one it does not know are
ignored. An attempt whose code cannot be fetched never reaches the runtime; it is reported EXITED with
the code fetcher's exit code (kept in ``<work-dir>/failed/`` so that an agent restart does not lose it).
Exited attempts are reported for ``retention_seconds``, then forgotten.

A sick disk is the node's fault (``diskguard.py``): on a node whose work directory is full or read-only a start
ends at once with ``NODE_DISK_FULL`` (the master placed it before it heard; it is requeued elsewhere), and so
does one whose preparation (its directory, the codeDir copy, the code cache) fails for want of disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

from pai.domain.localpaths import master_paths
from pai.nodeagent.codefetch import CodeFetcher
from pai.nodeagent.codefetch_model import CodeFetchError
from pai.nodeagent.diskguard import DiskGuard
from pai.nodeagent.logfmt import BoundLogger
from pai.nodeagent.members import MembersFiles
from pai.nodeagent.paths import AgentPaths, is_attempt_id
from pai.nodeagent.runtime import Runtime
from pai.nodeagent.triallib import with_master_url
from pai.protocol import ContainerReport, ContainerStatus, PlatformExit, ProtocolError, StartTask, StopTask
from pai.protocol.members import JobMembers

DEFAULT_RETENTION_SECONDS = 600.0


def _fields(cmd: StartTask) -> dict[str, object]:
    return {"attempt": cmd.attempt_id, "job": cmd.job_key, "role": cmd.role, "index": cmd.index}


class Supervisor:
    def __init__(
        self,
        runtime: Runtime,
        fetcher: CodeFetcher,
        paths: AgentPaths,
        log: BoundLogger,
        *,
        retention_seconds: float = DEFAULT_RETENTION_SECONDS,
        on_change: Callable[[], None] | None = None,
        disk: DiskGuard | None = None,
        master_url: Callable[[], str] | None = None,
    ) -> None:
        """``master_url``: the base URL of the master the agent follows now, ``PAI_MASTER_URL`` of every task
        started from now on (``triallib.with_master_url``)."""
        self.runtime = runtime
        self._master_url = master_url
        self._disk = disk
        self._fetcher = fetcher
        self._paths = paths
        self._log = log
        self._retention = retention_seconds
        self._on_change = on_change
        self._preparing: dict[str, StartTask] = {}
        self._stopped_early: dict[str, StopTask] = {}  # stops that came while the code was fetched
        self._failed: dict[str, ContainerReport] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._members = MembersFiles()
        self._load_failed()

    def known(self, attempt_id: str) -> bool:
        return (
            attempt_id in self._preparing
            or attempt_id in self._failed
            or any(r.attempt_id == attempt_id for r in self.runtime.reports())
        )

    def submit(self, command: StartTask | StopTask) -> None:
        """Run a command from the master in the background (a stop may wait for its grace period)."""
        coro = self.start(command) if isinstance(command, StartTask) else self.stop(command)
        self._spawn(coro)

    async def start(self, cmd: StartTask) -> None:
        if self.known(cmd.attempt_id):
            self._log.debug("start ignored: attempt already known", extra=_fields(cmd))
            return
        if not is_attempt_id(cmd.attempt_id):
            self._fail(cmd, PlatformExit.CONTAINER_START_FAILED, "the attempt id is not a plain token")
            return
        sick = self._disk.sickness() if self._disk is not None else None
        if sick is not None:
            self._log.info("start refused: the node is sick", extra=_fields(cmd) | {"problem": sick})
            self._fail(cmd, PlatformExit.NODE_DISK_FULL, f"not started: the node is sick ({sick})")
            return
        self._preparing[cmd.attempt_id] = cmd
        try:
            workdir = self._paths.attempt(cmd.attempt_id)
            workdir.mkdir(parents=True, exist_ok=True)
            if cmd.members is not None:  # an elastic job's: the file is there when the task starts
                self._members.first(workdir, cmd.attempt_id, cmd.members)
            if cmd.code_dir:
                await self._fetch(cmd, workdir / "code")
            early = self._stopped_early.pop(cmd.attempt_id, None)
            if early is not None:
                self._fail(cmd, early.exit_code, f"{early.reason} (before it started)")
                return
            if self._master_url is not None:
                cmd = with_master_url(cmd, self._master_url())
            await self.runtime.start(cmd, workdir)
            if self._on_change is not None:  # report it running now, not at the next heartbeat
                self._on_change()
        except CodeFetchError as e:
            extra = {"exit_code": int(e.exit_code), "error": e.message}
            self._log.info("code fetch failed", extra=_fields(cmd) | extra)
            self._fail(cmd, e.exit_code, e.message)
        except Exception as e:
            if self._disk is not None and self._disk.failed("a new attempt's files", e, attempt=cmd.attempt_id):
                self._fail(cmd, PlatformExit.NODE_DISK_FULL, f"the node agent could not prepare it: {e}")
                return
            self._log.exception("attempt could not start", extra=_fields(cmd))
            self._fail(cmd, PlatformExit.CONTAINER_START_FAILED, f"the node agent could not start it: {e}")
        finally:
            self._preparing.pop(cmd.attempt_id, None)
            self._stopped_early.pop(cmd.attempt_id, None)

    async def stop(self, cmd: StopTask) -> None:
        if cmd.attempt_id in self._preparing:
            self._stopped_early[cmd.attempt_id] = cmd
        elif cmd.attempt_id not in self._failed:
            await self.runtime.stop(cmd.attempt_id, cmd.grace_seconds, cmd.exit_code, cmd.reason)

    async def stop_all(self, grace_seconds: float, exit_code: int, reason: str) -> None:
        running = [r.attempt_id for r in self.reports() if r.status is ContainerStatus.RUNNING]
        await asyncio.gather(*(self.stop(StopTask(a, grace_seconds, exit_code, reason)) for a in running))
        await self.drain()

    def reports(self) -> list[ContainerReport]:
        preparing = [
            ContainerReport(c.attempt_id, c.job_key, c.role, c.index, ContainerStatus.RUNNING, reason="fetching code")
            for c in self._preparing.values()
        ]
        return [*self.runtime.reports(), *self._failed.values(), *preparing]

    def members(self, jobs: Iterable[JobMembers]) -> None:
        """Keep the members file of every live attempt of these elastic jobs up to date (pai.nodeagent.members)."""
        by_key = {m.job_key: m for m in jobs}
        live = [r for r in self.reports() if r.status is ContainerStatus.RUNNING and r.attempt_id not in self._failed]
        for r in live:
            if (m := by_key.get(r.job_key)) is not None and is_attempt_id(r.attempt_id):
                try:
                    self._members.update(self._paths.attempt(r.attempt_id), r.attempt_id, m)
                except OSError as e:  # a full disk: the next reply that carries it tries again
                    self._log.warning("members file not written", extra={"attempt": r.attempt_id, "error": str(e)})
        self._members.forget({r.attempt_id for r in live})

    def expire(self, now: float) -> list[str]:
        """Forget the attempts that exited ``retention_seconds`` ago or earlier; their ids."""
        old = [
            r.attempt_id
            for r in self.runtime.reports() + list(self._failed.values())
            if r.status is ContainerStatus.EXITED and now - (r.finished_at or now) >= self._retention
        ]
        for attempt_id in old:
            self.runtime.forget(attempt_id)
            if self._failed.pop(attempt_id, None) is not None and is_attempt_id(attempt_id):
                self._failed_path(attempt_id).unlink(missing_ok=True)
        return old

    async def drain(self) -> None:
        """Wait for the commands under way."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.drain()

    # -- internals -------------------------------------------------------------------------------------

    async def _fetch(self, cmd: StartTask, dest: Path) -> None:
        if dest.exists():  # a half copy left by an agent that died while fetching
            shutil.rmtree(dest)
        result = await asyncio.to_thread(self._fetcher.fetch, cmd.code_dir, dest, cmd.webhdfs,
                                         roots=cmd.local_roots, protected=master_paths(cmd.protected_paths))
        extra = {"bytes": result.bytes, "files": result.files, "cached": result.cached}
        self._log.info("code fetched", extra=_fields(cmd) | extra)

    def _fail(self, cmd: StartTask, exit_code: int, reason: str) -> None:
        report = ContainerReport(
            cmd.attempt_id, cmd.job_key, cmd.role, cmd.index, ContainerStatus.EXITED,
            exit_code=int(exit_code), reason=reason, finished_at=time.time(),
        )  # fmt: skip
        self._failed[cmd.attempt_id] = report
        if is_attempt_id(cmd.attempt_id):
            try:
                self._paths.failed.mkdir(parents=True, exist_ok=True)
                self._failed_path(cmd.attempt_id).write_text(json.dumps(report.to_dict()))
            except OSError as e:  # on a sick disk the report lives in memory only (lost if the agent restarts)
                if self._disk is None or not self._disk.failed("attempt record", e, attempt=cmd.attempt_id):
                    raise
        if self._on_change is not None:
            self._on_change()

    def _failed_path(self, attempt_id: str) -> Path:
        return self._paths.failed / f"{attempt_id}.json"

    def _load_failed(self) -> None:
        for path in sorted(self._paths.failed.glob("*.json")):
            with contextlib.suppress(OSError, ValueError, ProtocolError):
                report = ContainerReport.from_dict(json.loads(path.read_text()))
                self._failed[report.attempt_id] = report

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
