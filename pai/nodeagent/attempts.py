"""What every runtime keeps about its attempts: the records (on disk in its state directory, so that a
restarted agent learns how they ended), stops asked for, exits reported to the agent. The runtimes add how
an attempt runs (a process group, a container).

With the agent's ``DiskGuard``: a record that cannot be written for want of disk is kept in memory only (the
attempt goes on, and its exit is still reported), and an exit while the node is disk-sick is judged by
``diskguard.attribute`` (the node's fault, unless the task filled the disk itself)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Generic, TypeVar

from pai.nodeagent import attempt_record, diskguard, jobsecrets, sshlayout
from pai.nodeagent.attempt_record import AttemptRecord
from pai.nodeagent.diskguard import DiskGuard
from pai.nodeagent.logfmt import BoundLogger, bind
from pai.nodeagent.runtime import ExitListener
from pai.protocol import ContainerReport, PlatformExit


@dataclass(eq=False)
class Attempt:
    record: AttemptRecord
    stopping: bool = False  # a stop is under way
    finished: asyncio.Event = field(default_factory=asyncio.Event)


A = TypeVar("A", bound=Attempt)


class AttemptBook(Generic[A]):
    def __init__(self, state_dir: Path, on_exit: ExitListener | None, log: BoundLogger | None,
                 disk: DiskGuard | None = None) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = state_dir
        self.log = log or bind(logging.getLogger("pai.nodeagent.runtime"))
        self.attempts: dict[str, A] = {}
        self.disk = disk
        self._on_exit = on_exit

    def reports(self) -> list[ContainerReport]:
        return [a.record.to_report() for a in self.attempts.values()]

    def forget(self, attempt_id: str) -> None:
        attempt = self.attempts.get(attempt_id)
        if attempt is not None and not attempt.record.running:
            del self.attempts[attempt_id]
            self.path(attempt_id).unlink(missing_ok=True)

    def to_stop(self, attempt_id: str, grace_seconds: float, exit_code: int | None, reason: str | None) -> A | None:
        """The running attempt to stop, marked stopping (the first stop's code and reason are the ones
        reported); None when it is unknown or has ended."""
        attempt = self.attempts.get(attempt_id)
        if attempt is None or attempt.finished.is_set():
            return None
        if not attempt.record.stop_requested:
            attempt.record = attempt.record.stopping(exit_code, reason)
            self.save(attempt.record)
        attempt.stopping = True
        self.log.info("stopping attempt", extra=fields(attempt.record) | {"grace": grace_seconds})
        return attempt

    def finish(self, attempt: A, record: AttemptRecord) -> None:
        """The attempt ended as ``record`` says (or as the node's disk makes it): kept on disk (its secrets and
        SSH keys removed), then reported."""
        record = self._judge(record)
        attempt.record = record
        self.save(record)
        jobsecrets.remove(Path(record.workdir))
        sshlayout.remove(Path(record.workdir))
        attempt.finished.set()
        self.log.info("attempt exited", extra=fields(record) | {"exit_code": record.exit_code})
        if self._on_exit is not None:
            try:
                self._on_exit(record.to_report())
            except Exception:
                self.log.exception("exit listener failed", extra=fields(record))

    def save(self, record: AttemptRecord) -> None:
        try:
            attempt_record.save(record, self.path(record.attempt_id))
        except OSError as e:
            if self.disk is None or not self.disk.failed("attempt record", e, attempt=record.attempt_id):
                raise

    def start_failed(self, e: BaseException) -> PlatformExit:
        """The exit code of an attempt that could not start because of ``e``: the node's fault when it is a
        disk error (reported to the guard), else CONTAINER_START_FAILED."""
        if self.disk is not None and self.disk.failed("a new attempt's files", e):
            return PlatformExit.NODE_DISK_FULL
        return PlatformExit.CONTAINER_START_FAILED

    def _judge(self, record: AttemptRecord) -> AttemptRecord:
        disk, code = self.disk, record.exit_code
        if disk is None or code is None or not 0 < code < 256 or (sickness := disk.sickness()) is None:
            return record
        culprit = record.workdir != "" and diskguard.filled_it(Path(record.workdir), disk.work_dir)
        new_code, reason = diskguard.attribute(code, record.reason, sickness, culprit)
        if new_code != code:
            self.log.warning("attempt failed on a sick node: the node's fault", extra=fields(record) | {
                "exit_code": code, "reported_as": new_code})
        return replace(record, exit_code=new_code, reason=reason)

    def path(self, attempt_id: str) -> Path:
        return self.state_dir / f"{attempt_id}.json"


def fields(record: AttemptRecord) -> dict[str, object]:
    return {"attempt": record.attempt_id, "job": record.job_key, "role": record.role, "index": record.index}
