"""Exec: a command run inside a running task attempt, with its own stdin, output and (maybe) terminal.

One primitive for every way in: the agent's ``/exec`` WebSocket (``pai.nodeagent.execserver``) and its SSH
endpoint both ask the runtime for an :class:`ExecSession` and pump bytes. The docker runtime execs in the task's
container (Docker Engine exec API); the process runtime starts the command with the task's environment,
working directory and user. Either way the session's processes are the session's: :meth:`ExecSession.kill`
(and so a dropped connection) leaves none of them on the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pai.protocol.exec_frames import DEFAULT_COLS, DEFAULT_ROWS, STDERR, STDOUT

__all__ = [
    "SHELL",
    "STDERR",
    "STDOUT",
    "AttemptNotRunning",
    "ExecError",
    "ExecRequest",
    "ExecSession",
    "NoSuchAttempt",
    "command",
    "exec_env",
]


@dataclass(frozen=True, slots=True)
class ExecRequest:
    """``argv``: the command; ``()`` = the task's login shell (``/bin/bash`` when the task has it, else ``/bin/sh``)
    interactive. ``env``: variables over the task's own (e.g. TERM). ``cwd``: None = the task's working directory."""

    argv: tuple[str, ...]
    tty: bool = False
    rows: int = DEFAULT_ROWS
    cols: int = DEFAULT_COLS
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None


class ExecSession(Protocol):
    """A running exec. Output is read in chunks tagged with their stream; with a tty everything is stdout."""

    async def write(self, data: bytes) -> None:
        """Feed stdin (ignored once stdin is closed or the process is gone)."""

    async def close_stdin(self) -> None:
        """EOF on stdin (with a tty: the terminal's EOF character, ^D)."""

    async def read(self) -> tuple[int, bytes] | None:
        """The next chunk of output as (STDOUT | STDERR, bytes); None once every output stream is at its end."""

    async def resize(self, rows: int, cols: int) -> None:
        """The terminal's new size (nothing without a tty)."""

    async def wait(self) -> int:
        """The exit code once the command has ended: its status, or 128 + the signal that killed it."""

    async def kill(self) -> None:
        """Kill what the session started, its descendants too, and release its resources; idempotent. Returns once
        none of its processes is left."""


class ExecError(Exception):
    """An exec the runtime refuses; ``attempt_id`` names the attempt."""

    def __init__(self, attempt_id: str, message: str) -> None:
        super().__init__(message)
        self.attempt_id = attempt_id
        self.message = message


class NoSuchAttempt(ExecError):
    """The runtime does not know the attempt (never on this node, or forgotten)."""

    def __init__(self, attempt_id: str) -> None:
        super().__init__(attempt_id, f"attempt {attempt_id} is not on this node")


class AttemptNotRunning(ExecError):
    """The attempt is known but not running (exited, or still starting)."""

    def __init__(self, attempt_id: str, state: str = "exited") -> None:
        super().__init__(attempt_id, f"attempt {attempt_id} is not running ({state})")
        self.state = state


# ``ExecRequest.argv == ()``: the task's shell, bash where the task has it (not a login shell: /etc/profile would
# replace the task's PATH).
SHELL = ("/bin/sh", "-c", "if [ -x /bin/bash ]; then exec /bin/bash -i; fi; exec /bin/sh -i")
DEFAULT_TERM = "xterm"


def command(req: ExecRequest) -> tuple[str, ...]:
    """The argv to run for ``req``."""
    return req.argv or SHELL


def exec_env(req: ExecRequest) -> dict[str, str]:
    """The variables an exec adds to the task's: ``req.env``, and TERM for a terminal when it has none."""
    return {"TERM": DEFAULT_TERM, **req.env} if req.tty else dict(req.env)
