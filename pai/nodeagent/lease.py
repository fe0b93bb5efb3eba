"""The fencing lease (``fence.py``): until when, on this machine's monotonic clock, the node's tasks may run.

The agent renews it on every reply from the master. It travels two ways: in a file (``<work-dir>/lease.json``),
which a restarted agent reads and takes over, and down a pipe from the agent to its own watchdog, which needs no
disk. A renewal that cannot be written to the file (the work directory is full or read-only: ``diskguard.py``)
still reaches the watchdog by the pipe, so an agent that is alive and hears from the master never has its tasks
fenced for want of disk. The watchdog takes the later of the two (:func:`current`); once the pipe is closed (the
agent died) only the file can extend the lease.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

LEASE_FILE = "lease.json"

log = logging.getLogger("pai.nodeagent.fence")


@dataclass(frozen=True, slots=True)
class LeaseState:
    owner: str
    until: float  # time.monotonic() on this machine
    grace: float
    released: bool = False


class Lease:
    """The agent's side: take the lease over, renew it on every reply from the master, release it.

    Each state goes down the pipe to the watchdog (once :meth:`attach` gave it one) and into the file. A write
    to the file that fails is handed to ``on_error`` (the agent's ``DiskGuard.failed``): when that handles it
    (a full or read-only disk), the lease goes on by the pipe alone; otherwise it is raised."""

    def __init__(self, work_dir: Path, owner: str, on_error: Callable[[str, OSError], bool] | None = None) -> None:
        self.path = work_dir / LEASE_FILE
        self.owner = owner
        self.channel: int | None = None  # the write end of the pipe to this agent's watchdog
        self._on_error = on_error
        self._state: LeaseState | None = None

    def take_over(self, default_until: float, grace: float) -> None:
        """Become the owner; the tasks of an earlier agent keep the time they had left, never more."""
        previous = read_lease(self.path)
        until = previous.until if previous is not None and not previous.released else default_until
        self._write(LeaseState(self.owner, until, grace))

    def renew(self, until: float, grace: float) -> None:
        self._write(LeaseState(self.owner, until, grace))

    def release(self) -> None:
        self._write(LeaseState(self.owner, 0.0, 0.0, released=True))

    def attach(self, fd: int) -> None:
        """Send every state down ``fd`` from now on, the current one first."""
        os.set_blocking(fd, False)
        self.channel = fd
        if self._state is not None:
            self._send(self._state)

    def close(self) -> None:
        """Close the pipe: to the watchdog, as if the agent were gone (only the file can extend the lease now)."""
        if self.channel is not None:
            os.close(self.channel)
            self.channel = None

    def _write(self, state: LeaseState) -> None:
        self._state = state
        self._send(state)
        try:
            self._store(state)
        except OSError as e:
            if self._on_error is None or not self._on_error("the lease", e):
                raise

    def _store(self, state: LeaseState) -> None:
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(asdict(state)))
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):  # a half-written copy must not take the last free blocks
                tmp.unlink(missing_ok=True)
            raise

    def _send(self, state: LeaseState) -> None:
        if self.channel is None:
            return
        try:  # one line, under PIPE_BUF: written whole or not at all
            os.write(self.channel, (json.dumps(asdict(state)) + "\n").encode())
        except BlockingIOError:  # the watchdog is behind by 64 KB of renewals: the next one will do
            pass
        except OSError as e:  # the watchdog is gone: the file alone guards the tasks now
            log.warning("the lease watchdog does not listen: the lease goes on in the file only error=%s", e)
            self.close()


def read_lease(path: Path) -> LeaseState | None:
    try:
        return _parse(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _parse(d: Any) -> LeaseState:
    return LeaseState(str(d["owner"]), float(d["until"]), float(d["grace"]), bool(d.get("released", False)))


# ---- the watchdog's side ----------------------------------------------------------------------------


class Channel:
    """The watchdog's end of the agent's pipe: the newest state the agent sent, and whether it closed it."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self.fd = fd
        self.closed = False
        self.latest: LeaseState | None = None
        self._buffer = b""

    def poll(self) -> LeaseState | None:
        while not self.closed:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:  # the agent is gone (every end of the pipe it held closed with it)
                self.closed = True
                break
            self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self.latest = _parse(json.loads(line))
        return self.latest


def current(owner: str, filed: LeaseState | None, sent: LeaseState | None, stale_owner: str | None,
            channel: bool) -> tuple[LeaseState | None, str | None]:
    """The lease the watchdog of ``owner`` guards, from the file (``filed``) and the pipe (``sent``); or why it
    exits; or neither (nothing heard yet). ``stale_owner``: the owner the file named when the watchdog started
    (an earlier agent's lease, left there when this agent could not write its own); ``channel``: whether this
    watchdog has a pipe (without one, the file is the only word, as it was)."""
    if not channel:
        if filed is None or filed.owner != owner:
            return None, "the lease has another owner"
        return (None, "the agent released the lease") if filed.released else (filed, None)
    if filed is not None and filed.owner not in (owner, stale_owner):
        return None, "the lease has another owner"
    mine = [s for s in (filed, sent) if s is not None and s.owner == owner]
    if any(s.released for s in mine):
        return None, "the agent released the lease"
    return (max(mine, key=lambda s: s.until), None) if mine else (None, None)
