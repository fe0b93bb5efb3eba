"""The runtime interface: what runs a task attempt on this node (process today, docker later).

A runtime is constructed with a directory of its own for state and an ``on_exit`` listener that it calls
(on the event loop) whenever an attempt it runs ends, so that the agent reports the exit at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pai.nodeagent.attempt_record import AttemptRecord
from pai.nodeagent.taskexec import ExecRequest, ExecSession
from pai.protocol import ContainerReport, StartTask

ExitListener = Callable[[ContainerReport], None]


@dataclass(frozen=True, slots=True)
class TaskUsage:
    """What a running attempt uses now (the agent's /metrics)."""

    record: AttemptRecord  # who it is: job, role, index, VC, GPUs
    cpu_seconds: float  # CPU time since it started, every process of it
    memory_bytes: int  # resident memory now


class Runtime(Protocol):
    """Runs task attempts; knows every attempt it started until the agent forgets it.

    - ``start`` runs ``cmd`` with ``workdir`` (the attempt's directory: ``stdout.log`` and ``stderr.log``
      land there, the code in ``workdir/code`` when it exists). A start that fails is not raised: the
      attempt is reported EXITED with ``PlatformExit.CONTAINER_START_FAILED`` (or a more precise code).
    - ``stop`` ends the attempt: SIGTERM (or the runtime's equivalent), ``grace_seconds``, then kill; it
      returns once nothing of the attempt is left. ``exit_code``/``reason`` (from a StopTask) replace the
      process's own in the report. Stopping an unknown or exited attempt does nothing.
    - ``reports`` gives the current state of every attempt it knows: running, or exited and not yet
      forgotten. A runtime restarted on the same state directory re-adopts what still runs.
    - ``usage`` measures every running attempt (CPU time, resident memory); one it cannot measure is left out.
    - ``forget`` drops an exited attempt (its logs stay on disk).
    - ``exec`` starts a command inside a running attempt (``pai.nodeagent.taskexec``): its environment, working
      directory and user; raises ``NoSuchAttempt`` or ``AttemptNotRunning``.
    - ``close`` releases the runtime's own resources; it does not stop running attempts.
    """

    name: str

    async def start(self, cmd: StartTask, workdir: Path) -> None: ...

    async def stop(
        self, attempt_id: str, grace_seconds: float, exit_code: int | None = None, reason: str | None = None
    ) -> None: ...

    def reports(self) -> list[ContainerReport]: ...

    async def usage(self) -> list[TaskUsage]: ...

    def forget(self, attempt_id: str) -> None: ...

    async def exec(self, attempt_id: str, req: ExecRequest) -> ExecSession: ...

    async def close(self) -> None: ...
