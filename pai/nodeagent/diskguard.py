"""The agent on a sick disk: a work directory that is full (ENOSPC, EDQUOT) or read-only (EROFS).

Everything the agent writes there (the lease, the attempt records, the logs' rotation, the code cache, a task's
secrets) goes through :meth:`DiskGuard.failed` when it fails: a disk error is not raised on, it is

- logged as one WARNING line per kind of failure (what was written, and the errno), then at most once a
  minute with how many more there were: never a traceback, never a flood;
- remembered for ``recent_seconds``, so that the node's health says so (``health.disk_problem``);
- raised as an alarm (``on_alarm``, from whatever thread failed), so that the agent reports the node unhealthy
  with its next request, at once, not at the next periodic check.

The node's fault, not the task's: a task that exits with a code of its own (1..255) while the node is disk-sick
ends with ``PlatformExit.NODE_DISK_FULL`` instead (its own code and reason kept in the reason): a transient exit,
requeued elsewhere without using a retry. Unless its own attempt directory holds at least half of what the
disk's file system uses: then it filled the disk itself, and its exit stays its own (a task that fills every
disk it runs on must not be requeued forever). See :func:`attribute`.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pai.nodeagent.health import DiskError, disk_problem
from pai.nodeagent.logfmt import BoundLogger
from pai.protocol import PlatformExit
from pai.protocol.problems import DISK_SICK, kind_of

DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
WARN_EVERY_SECONDS = 60.0
RECENT_SECONDS = 10.0
CULPRIT_SHARE = 0.5  # an attempt directory holding this much of the file system's used space filled it itself
MAX_SCAN_ENTRIES = 20_000  # measuring an attempt directory stops here (what it found so far counts)


def disk_errno(e: BaseException) -> int | None:
    """The disk errno of ``e`` or of an exception it was raised from or during; None for any other error."""
    seen: set[int] = set()
    current: BaseException | None = e
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in DISK_ERRNOS:
            return current.errno
        current = current.__cause__ or current.__context__
    return None


@dataclass
class Throttle:
    """Lets one event of each key through every ``interval`` seconds; counts the others."""

    interval: float = WARN_EVERY_SECONDS
    _last: dict[object, float] = field(default_factory=dict)
    _held: dict[object, int] = field(default_factory=dict)

    def allow(self, key: object, now: float) -> int | None:
        """None when the event is held back; else how many of its kind were held back since the last one."""
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)


class DiskGuard:
    def __init__(self, work_dir: Path, log: BoundLogger, on_alarm: Callable[[], None] | None = None,
                 recent_seconds: float = RECENT_SECONDS) -> None:
        self.work_dir = work_dir
        self.on_alarm = on_alarm  # called from the thread that failed
        self.recent_seconds = recent_seconds
        self._log = log
        self._lock = threading.Lock()
        self._throttle = Throttle()
        self._last: DiskError | None = None
        self.failures: dict[tuple[str, str], int] = {}  # (what, errno name) -> count, for the agent's metrics

    def failed(self, what: str, e: BaseException, **fields: object) -> bool:
        """Handle a failed write: True when it was a disk error (logged, remembered, alarmed), False otherwise
        (the caller handles it as before)."""
        code = disk_errno(e)
        if code is None:
            return False
        now = time.monotonic()
        name = errno.errorcode.get(code, str(code))
        with self._lock:
            self._last = DiskError(code, what, now)
            self.failures[(what, name)] = self.failures.get((what, name), 0) + 1
            held = self._throttle.allow((what, code), now)
        if held is not None:
            extra = {"what": what, "errno": name, "error": os.strerror(code), "work_dir": str(self.work_dir),
                     **fields}
            if held:
                extra["more_since_last_line"] = held
            self._log.warning("cannot write to the work directory", extra=extra)
        if self.on_alarm is not None:
            self.on_alarm()
        return True

    def recent(self) -> DiskError | None:
        """The last disk error, if it happened within ``recent_seconds``."""
        with self._lock:
            last = self._last
        return last if last is not None and time.monotonic() - last.at <= self.recent_seconds else None

    def problem(self, min_free_mb: int = 0) -> str | None:
        """The work directory's disk problem now, with its figures (``health.disk_problem``)."""
        return disk_problem(self.work_dir, min_free_mb, self.recent())

    def sickness(self) -> str | None:
        """The problem that makes the node disk-sick now (full or read-only), or None."""
        found = self.problem()
        return found if found is not None and kind_of(found) in DISK_SICK else None


# ---- whose fault an exit is ---------------------------------------------------------------------------


def attribute(exit_code: int, reason: str | None, sickness: str | None, culprit: bool) -> tuple[int, str | None]:
    """The exit code and reason to report for an attempt that ended with ``exit_code``, its node being
    ``sickness`` (a disk-sick problem in words, or None) at that moment; ``culprit``: the attempt's own directory
    holds most of the disk."""
    if sickness is None or not 0 < exit_code < 256:
        return exit_code, reason
    own = f"exited {exit_code}" + (f" ({reason})" if reason else "")
    if culprit:
        return exit_code, f"{reason + '; ' if reason else ''}the node's disk was sick ({sickness}) and this " \
                          "task's own directory held most of it: its exit stays its own"
    return int(PlatformExit.NODE_DISK_FULL), f"{own} while the node was sick ({sickness}): the node's fault, " \
                                             f"requeued (the task's own exit code was {exit_code})"


def used_bytes(path: Path, limit: int = MAX_SCAN_ENTRIES) -> int:
    """The disk space the files under ``path`` take (allocated blocks; links not followed; at most ``limit``
    entries looked at)."""
    total, seen = 0, 0
    for dirpath, dirnames, filenames in os.walk(path, onerror=lambda e: None):
        for name in dirnames + filenames:
            seen += 1
            if seen > limit:
                return total
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


def filled_it(attempt_dir: Path, work_dir: Path) -> bool:
    """Whether ``attempt_dir`` holds at least :data:`CULPRIT_SHARE` of the used space of ``work_dir``'s disk."""
    try:
        st = os.statvfs(work_dir)
    except OSError:
        return False
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return used > 0 and used_bytes(attempt_dir) >= CULPRIT_SHARE * used
