"""Fencing of deposed leaders (ADR 0001): the highest launcher epoch this node has seen, and the commands refused.

Every reply and poke of the master carries the epoch of its launcher's lease. The rule (:func:`admits`): a message
of an epoch lower than the highest the agent has seen is a deposed leader's, and is refused; one of a higher epoch
raises the mark. Epoch 0 (a master that holds no lease, or predates the field) is therefore accepted only while the
agent has never seen a higher one.

The mark is kept in ``<work-dir>/epoch.json`` (written whole, by rename), so that a restarted agent still refuses
a deposed leader. A write that fails goes to ``on_error`` (the agent's ``DiskGuard.failed``: a full or read-only
work directory is a WARNING and makes the node unhealthy); whatever the error, the agent goes on with the mark in
memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pai.nodeagent.diskguard import Throttle
from pai.nodeagent.logfmt import BoundLogger
from pai.protocol import Poke, StartTask, StopTask

EPOCH_FILE = "epoch.json"
REFUSABLE = ("start", "stop", "poke")  # what the agent's metrics count refusals of (0 until one is refused)


def admits(highest: int, epoch: int) -> bool:
    """Whether a message of ``epoch`` may act on a node that has seen ``highest``."""
    return epoch >= highest


class EpochMark:
    def __init__(self, work_dir: Path, log: BoundLogger,
                 on_error: Callable[[str, OSError], bool] | None = None) -> None:
        self.path = work_dir / EPOCH_FILE
        self._log = log
        self._on_error = on_error
        self.highest = read_epoch(self.path, log)
        self.refused: dict[str, int] = dict.fromkeys(REFUSABLE, 0)  # refused since the agent started, by type
        self._throttle = Throttle()

    def observe(self, epoch: int) -> bool:
        """Whether a message of ``epoch`` is admitted; a higher epoch than any seen raises the mark (and is kept)."""
        if not admits(self.highest, epoch):
            return False
        if epoch > self.highest:
            self.highest = epoch
            self._store(epoch)
        return True

    def admit(self, epoch: int, commands: Sequence[StartTask | StopTask] = ()) -> bool:
        """Whether a reply of ``epoch`` may act; if not, each of its ``commands`` is refused: counted, and one
        WARNING line with its ids and both epochs. A refused reply without commands is said at most once a minute
        (a deposed leader answers every heartbeat)."""
        if self.observe(epoch):
            return True
        for command in commands:
            kind = "start" if isinstance(command, StartTask) else "stop"
            self.refused[kind] += 1
            job = command.job_key if isinstance(command, StartTask) else None
            self._log.warning("refused a command of a deposed master", extra={
                "command": kind, "attempt": command.attempt_id, "job": job, "epoch": epoch,
                "highest_epoch": self.highest})
        if not commands and (held := self._throttle.allow("reply", time.monotonic())) is not None:
            self._log.warning("ignored a reply of a deposed master", extra={
                "epoch": epoch, "highest_epoch": self.highest, "more_since_last_line": held or None})
        return False

    def admit_poke(self, poke: Poke) -> bool:
        """Whether a poke may make the agent heartbeat now; a deposed leader's is refused (counted, one line)."""
        if self.observe(poke.epoch):
            return True
        self.refused["poke"] += 1
        self._log.warning("refused a command of a deposed master", extra={
            "command": "poke", "reason": poke.reason, "epoch": poke.epoch, "highest_epoch": self.highest})
        return False

    def _store(self, epoch: int) -> None:
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"epoch": epoch}))
            os.replace(tmp, self.path)
        except OSError as e:
            with contextlib.suppress(OSError):  # a half-written copy must not take the last free blocks
                tmp.unlink(missing_ok=True)
            if self._on_error is None or not self._on_error("the master's epoch", e):
                self._log.warning("cannot keep the master's epoch on disk: kept in memory only",
                                  extra={"epoch": epoch, "path": str(self.path), "error": str(e)})


def read_epoch(path: Path, log: BoundLogger) -> int:
    """The mark kept at ``path``; 0 when there is none. One that cannot be read is 0 too, said in the log (an
    agent must start; an operator who wipes the work directory resets the mark the same way)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return 0
    except OSError as e:
        log.warning("cannot read the master's epoch: starting from 0", extra={"path": str(path), "error": str(e)})
        return 0
    try:
        epoch = json.loads(text)["epoch"]
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch {epoch!r} is not an integer >= 0")
    except (ValueError, KeyError, TypeError) as e:
        log.warning("the master's epoch file is not readable: starting from 0",
                    extra={"path": str(path), "error": str(e)})
        return 0
    return epoch
