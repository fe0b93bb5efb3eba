"""What every runtime keeps about its attempts: the records (on disk in its state directory, so that a
restarted agent learns how they ended), stops asked for, exits reported to the agent. The runtimes add how
an attempt runs (a process group, a container)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from pai.nodeagent import attempt_record, jobsecrets
from pai.nodeagent.attempt_record import AttemptRecord
from pai.nodeagent.logfmt import BoundLogger, bind
from pai.nodeagent.runtime import ExitListener
from pai.protocol import ContainerReport


@dataclass(eq=False)
class Attempt:
    record: AttemptRecord
    stopping: bool = False  # a stop is under way
    finished: asyncio.Event = field(default_factory=asyncio.Event)


A = TypeVar("A", bound=Attempt)


class AttemptBook(Generic[A]):
    def __init__(self, state_dir: Path, on_exit: ExitListener | None, log: BoundLogger | None) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = state_dir
        self.log = log or bind(logging.getLogger("pai.nodeagent.runtime"))
        self.attempts: dict[str, A] = {}
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
        """The attempt ended as ``record`` says: kept on disk (its secrets removed), then reported."""
        attempt.record = record
        self.save(record)
        jobsecrets.remove(Path(record.workdir))
        attempt.finished.set()
        self.log.info("attempt exited", extra=fields(record) | {"exit_code": record.exit_code})
        if self._on_exit is not None:
            try:
                self._on_exit(record.to_report())
            except Exception:
                self.log.exception("exit listener failed", extra=fields(record))

    def save(self, record: AttemptRecord) -> None:
        attempt_record.save(record, self.path(record.attempt_id))

    def path(self, attempt_id: str) -> Path:
        return self.state_dir / f"{attempt_id}.json"


def fields(record: AttemptRecord) -> dict[str, object]:
    return {"attempt": record.attempt_id, "job": record.job_key, "role": record.role, "index": record.index}
