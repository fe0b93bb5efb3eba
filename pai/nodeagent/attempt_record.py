"""What the process runtime remembers about an attempt, on disk, so that a restarted agent can re-adopt it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pai.protocol import ContainerReport, ContainerStatus, PlatformExit, StartTask

LOST_REASON = "the attempt ended while the node agent was not running; its exit code is unknown"


def exit_code_of(returncode: int) -> int:
    """A Popen return code as a shell reports it: the code itself, or 128+N when killed by signal N."""
    return returncode if returncode >= 0 else 128 - returncode


def exit_reason_of(returncode: int) -> str | None:
    """``killed by SIGX`` for a Popen code -N, or a shell status 128+N (a shell cannot tell them apart)."""
    if 0 <= returncode <= 128:
        return None
    signum = -returncode if returncode < 0 else returncode - 128
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return f"killed by {name}"


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    attempt_id: str
    job_key: str
    role: str
    index: int
    workdir: str
    status: ContainerStatus = ContainerStatus.RUNNING
    pid: int | None = None
    pgid: int | None = None
    start_ticks: int | None = None  # /proc/<pid>/stat starttime: tells our process from a reused pid
    exit_code: int | None = None
    reason: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    stop_requested: bool = False
    stop_exit_code: int | None = None  # from the StopTask: replaces the process's own code
    stop_reason: str | None = None
    note: str | None = None  # added to the reason the attempt ends with (e.g. an image the runtime ignored)
    vc: str = ""  # the job's virtual cluster and the GPUs it holds here: the labels of the agent's metrics
    gpus: tuple[int, ...] = ()

    @classmethod
    def for_command(cls, cmd: StartTask, workdir: Path, note: str | None = None) -> AttemptRecord:
        return cls(cmd.attempt_id, cmd.job_key, cmd.role, cmd.index, str(workdir), note=note,
                   vc=cmd.env.get("PAI_VIRTUAL_CLUSTER", ""), gpus=cmd.gpus)

    @property
    def running(self) -> bool:
        return self.status is ContainerStatus.RUNNING

    def started(self, pid: int, start_ticks: int | None, now: float) -> AttemptRecord:
        return replace(self, pid=pid, pgid=pid, start_ticks=start_ticks, started_at=now)

    def stopping(self, exit_code: int | None, reason: str | None) -> AttemptRecord:
        return replace(self, stop_requested=True, stop_exit_code=exit_code, stop_reason=reason)

    def exited(self, exit_code: int, reason: str | None, now: float) -> AttemptRecord:
        """The attempt ended with ``exit_code``; a requested stop's code and reason take precedence."""
        if self.stop_requested and self.stop_exit_code is not None:
            exit_code = self.stop_exit_code
        if self.stop_requested and self.stop_reason is not None:
            reason = self.stop_reason
        if self.note:
            reason = f"{reason}; {self.note}" if reason else self.note
        return replace(self, status=ContainerStatus.EXITED, exit_code=exit_code, reason=reason, finished_at=now)

    def lost(self, now: float) -> AttemptRecord:
        return self.exited(int(PlatformExit.CONTAINER_LOST), LOST_REASON, now)

    def to_report(self) -> ContainerReport:
        return ContainerReport(
            attempt_id=self.attempt_id,
            job_key=self.job_key,
            role=self.role,
            index=self.index,
            status=self.status,
            exit_code=self.exit_code,
            reason=self.reason,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttemptRecord:
        return cls(**{**d, "status": ContainerStatus(d["status"]), "gpus": tuple(d.get("gpus", ()))})


def save(record: AttemptRecord, path: Path) -> None:
    """Write atomically: a crash leaves the old file or the new one, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(record.to_dict()))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):  # a half-written copy must not keep the last free blocks
            tmp.unlink(missing_ok=True)
        raise


def load(path: Path) -> AttemptRecord | None:
    try:
        return AttemptRecord.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None
