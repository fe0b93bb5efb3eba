"""The processes of ``pai up``: its master and its agent, the log file they share, and a watch on them.

Both write everything (their INFO lines, a traceback) to ``<data-dir>/up.log``, appended to by each ``pai up``
after a header line; the terminal shows it only with ``pai up -v`` (:class:`LogEcho`). Each child runs in a session
of its own, so that a Ctrl-C in the terminal reaches ``pai up`` alone, which stops the agent first (it stops its
tasks) and then the master. Every wait of ``pai up`` sleeps through :meth:`Children.sleep`, which checks the
children every 0.1 s: when one has exited, ``pai up`` stops the other and exits 3 with the log's last lines.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pai.cli.errors import CliError

LOG_NAME = "up.log"
TAIL_LINES = 20
EXIT_CLUSTER_DIED = 3
STOP_SECONDS = 20.0  # SIGTERM to SIGKILL for each child
POLL_SECONDS = 0.1


class ClusterDiedError(CliError):
    """The master or the agent of ``pai up`` exited while ``pai up`` was running."""

    exit_code = EXIT_CLUSTER_DIED

    def __init__(self, name: str, pid: int, returncode: int, log: Path, tail: str) -> None:
        how = f"was killed by {signal.Signals(-returncode).name}" if returncode < 0 else f"exited {returncode}"
        super().__init__(f"the {name} of pai up (pid {pid}) {how}; everything is stopped. The last lines of {log}:\n"
                         f"{tail}")
        self.name = name
        self.returncode = returncode


def log_tail(log: Path, start: int, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines written to ``log`` since offset ``start``, each indented."""
    try:
        with log.open("rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"  (cannot read it: {e})"
    return "\n".join("  " + line for line in text.splitlines()[-lines:]) or "  (nothing)"


class Children:
    """The master and the agent, in the order they started; each one's stdout and stderr appended to ``log``."""

    def __init__(self, log: Path) -> None:
        self.log = log
        with log.open("ab") as f:
            f.write(f"=== pai up (pid {os.getpid()}) starting at {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n".encode())
            self.start_offset = f.tell()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
        with self.log.open("ab") as out:
            self.procs[name] = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                                stderr=subprocess.STDOUT, start_new_session=True)

    def check(self) -> None:
        """Raise :class:`ClusterDiedError` when a child has exited."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise ClusterDiedError(name, proc.pid, proc.returncode, self.log, log_tail(self.log, self.start_offset))

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` that watches the children meanwhile."""
        deadline = time.monotonic() + seconds
        while True:
            self.check()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(POLL_SECONDS, left))

    def stop(self) -> None:
        """SIGTERM each child still running, the last started first (the agent stops its tasks on the way out)."""
        for proc in reversed(self.procs.values()):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


class LogEcho:
    """``pai up -v``: what is appended to the log from ``start`` on, copied to stderr as it comes."""

    def __init__(self, log: Path, start: int) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(log, start), name="pai-up-log", daemon=True)
        self._thread.start()

    def _run(self, log: Path, start: int) -> None:
        with log.open("rb") as f:
            f.seek(start)
            while True:
                chunk = f.read()
                if chunk:
                    sys.stderr.buffer.write(chunk)
                    sys.stderr.flush()
                elif self._stop.is_set():
                    return
                else:
                    self._stop.wait(POLL_SECONDS)

    def close(self) -> None:
        """Copy what is left, then stop."""
        self._stop.set()
        self._thread.join(timeout=5)

