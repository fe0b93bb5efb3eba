"""The process runtime: every attempt is ``sh -c <command>`` in a process group of its own, on the host.

For laptops without Docker and for fast tests; the job's image is not used (the task's exit diagnostics say
so), and CPU and memory are not limited. The docker runtime is the one for a cluster.

Like a container, the attempt ends when its first process (the group leader) exits; whatever it left
running in its group is then killed. ``stop`` signals the whole group: SIGTERM, the grace period, SIGKILL.
A state file per attempt (``<state_dir>/<attempt_id>.json``) lets a restarted agent re-adopt the groups
that still run and report those that ended meanwhile as ``PlatformExit.CONTAINER_LOST``. A process that
leaves its group (``setsid``) escapes; the docker runtime is the one that contains everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
import weakref
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pai.nodeagent import attempt_record, jobsecrets, members, process_exec, process_group, sshlayout, triallib
from pai.nodeagent.attempt_record import AttemptRecord, exit_code_of, exit_reason_of
from pai.nodeagent.attempts import Attempt, AttemptBook, fields
from pai.nodeagent.diskguard import DiskGuard
from pai.nodeagent.logfmt import BoundLogger
from pai.nodeagent.paths import check_attempt_id
from pai.nodeagent.runtime import ExitListener, TaskUsage
from pai.nodeagent.taskexec import AttemptNotRunning, ExecRequest, ExecSession, NoSuchAttempt, TaskFiles, exec_env
from pai.protocol import ContainerReport, StartTask

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LANG = "C.UTF-8"


def task_env(cmd: StartTask, workdir: Path, code_dir: Path | None) -> dict[str, str]:
    """A minimal base environment, the master's variables over it, then what the master left unset."""
    env = {"PATH": os.environ.get("PATH", DEFAULT_PATH), "HOME": str(workdir), "LANG": LANG}
    env.update(cmd.env)
    defaults = {
        "PAI_WORK_DIR": str(workdir),
        "PAI_CODE_DIR": str(code_dir) if code_dir is not None else "",
        # Without a container, CUDA's own variable is what keeps a task on its GPUs ("" hides them all).
        "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in cmd.gpus),
    }
    for key, value in defaults.items():
        if not env.get(key) and (value or key == "CUDA_VISIBLE_DEVICES"):
            env[key] = value
    return env


@dataclass(eq=False)
class _Attempt(Attempt):
    proc: subprocess.Popen[bytes] | None = None  # None for a group re-adopted from an earlier agent
    returncode: int | None = None


# The task's shell runs under a parent shell that writes its exit status to a file, so that an agent
# that re-adopts the group after a restart (and so cannot wait() for it) still learns how it ended.
EXIT_CODE_FILE = "exit_code"
_RECORD_EXIT = 'sh -c "$1"; rc=$?; echo "$rc" > "$2"; exit "$rc"'


def _recorded_exit(workdir: Path) -> int | None:
    try:
        return int((workdir / EXIT_CODE_FILE).read_text().strip())
    except (OSError, ValueError):
        return None

class ProcessRuntime:
    name = "process"

    def __init__(self, state_dir: Path, on_exit: ExitListener | None = None, log: BoundLogger | None = None,
                 disk: DiskGuard | None = None, *, trial_lib: triallib.TrialLib | None = None) -> None:
        """Use :meth:`open`, which also re-adopts the attempts of an earlier agent. ``disk``: the agent's guard
        of its work directory (``diskguard.py``). ``trial_lib``: the agent's ``pai_trial`` for trials' tasks (None:
        they have none)."""
        self._trial_lib = trial_lib
        self._book: AttemptBook[_Attempt] = AttemptBook(state_dir, on_exit, log, disk)
        self._state_dir = state_dir
        self._log = self._book.log
        self._attempts = self._book.attempts
        self._watchers: set[asyncio.Task[None]] = set()
        self._execs: dict[str, weakref.WeakSet[ExecSession]] = {}

    @classmethod
    async def open(
        cls, state_dir: Path, on_exit: ExitListener | None = None, log: BoundLogger | None = None,
        disk: DiskGuard | None = None, *, trial_lib: triallib.TrialLib | None = None,
    ) -> ProcessRuntime:
        rt = cls(state_dir, on_exit, log, disk, trial_lib=trial_lib)
        rt._readopt()
        return rt

    # -- the Runtime interface -------------------------------------------------------------------------

    async def start(self, cmd: StartTask, workdir: Path) -> None:
        check_attempt_id(cmd.attempt_id)
        if cmd.attempt_id in self._attempts:
            return
        record = AttemptRecord.for_command(cmd, workdir, _unused(cmd))
        code = workdir / "code"
        code_dir = code if code.is_dir() else None
        env = task_env(cmd, workdir, code_dir)
        try:
            workdir.mkdir(parents=True, exist_ok=True)
            if cmd.secrets is not None:
                env[jobsecrets.ENV] = str(jobsecrets.write(workdir, cmd.secrets))
            if cmd.members is not None:  # written by the supervisor, kept up to date from the master's replies
                env[members.ENV] = str(members.directory(workdir) / members.FILE)
            ssh_dir = sshlayout.prepare(cmd, workdir)  # the SSH endpoint's keys, the ~/.ssh layout of jobssh
            if ssh_dir is not None:
                env[sshlayout.ENV] = str(ssh_dir)
            if self._trial_lib is not None and triallib.is_trial(cmd):  # pai_trial first, then the job's own
                env[triallib.ENV] = triallib.pythonpath(str(self._trial_lib.directory()), cmd.env.get(triallib.ENV))
            with open(workdir / "stdout.log", "ab") as out, open(workdir / "stderr.log", "ab") as err:
                proc = subprocess.Popen(
                    ["sh", "-c", _RECORD_EXIT, "pai-task", cmd.command, str(workdir / EXIT_CODE_FILE)],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    cwd=code_dir or workdir,
                    env=env,
                    start_new_session=True,
                )
        except OSError as e:  # its files (logs, secrets) on a full or read-only disk: the node's fault
            attempt = self._attempts[cmd.attempt_id] = _Attempt(record)
            reason = f"cannot start the process: {e}"
            self._finish(attempt, record.exited(int(self._book.start_failed(e)), reason, time.time()))
            return
        st = process_group.read_stat(proc.pid)
        attempt = _Attempt(record.started(proc.pid, st.start_ticks if st else None, time.time()), proc=proc)
        self._attempts[cmd.attempt_id] = attempt
        self._save(attempt.record)
        self._log.info("attempt started", extra=self._fields(attempt.record) | {"pid": proc.pid})
        self._spawn(self._watch(attempt))

    async def stop(
        self, attempt_id: str, grace_seconds: float, exit_code: int | None = None, reason: str | None = None
    ) -> None:
        attempt = self._book.to_stop(attempt_id, grace_seconds, exit_code, reason)
        if attempt is None:
            return
        pgid = attempt.record.pgid
        assert pgid is not None
        process_group.signal_group(pgid, signal.SIGTERM)
        try:
            async with asyncio.timeout(grace_seconds):  # not wait_for: it may lose a cancellation on 3.11
                await attempt.finished.wait()
        except TimeoutError:
            self._log.info("grace period over: killing the group", extra=self._fields(attempt.record))
            await process_group.kill_group(pgid)
            await attempt.finished.wait()

    def reports(self) -> list[ContainerReport]:
        return self._book.reports()

    async def usage(self) -> list[TaskUsage]:
        return await asyncio.to_thread(self._usage)

    def _usage(self) -> list[TaskUsage]:
        """Every running attempt's process group, from one walk of /proc: its members' CPU time (with what their
        reaped children used) and resident memory."""
        running = {a.record.pgid: a.record for a in self._attempts.values()
                   if a.record.running and a.record.pgid is not None}
        groups = process_group.stats_by_group(set(running))
        hz, page = process_group.clock_ticks(), process_group.page_size()
        return [TaskUsage(record, sum(st.cpu_ticks for st in members) / hz, sum(st.rss_pages for st in members) * page)
                for pgid, record in running.items() if (members := groups.get(pgid))]

    def forget(self, attempt_id: str) -> None:
        self._book.forget(attempt_id)

    async def exec(self, attempt_id: str, req: ExecRequest) -> ExecSession:
        """``req`` with the environment and working directory the attempt's command was started with, read from
        its first process (so also for an attempt re-adopted after a restart), as this agent's user."""
        env, cwd = self._context(attempt_id)
        session = await process_exec.ProcessExec.start(req, {**env, **exec_env(req)}, req.cwd or cwd)
        self._execs.setdefault(attempt_id, weakref.WeakSet()).add(session)
        return session

    async def files(self, attempt_id: str) -> TaskFiles:
        """The host's file system, from the task's working directory (the task runs on the host, as this user)."""
        _, cwd = self._context(attempt_id)
        return TaskFiles("/", cwd)

    async def close(self) -> None:
        for task in list(self._watchers):
            task.cancel()
        for task in list(self._watchers):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _context(self, attempt_id: str) -> tuple[dict[str, str], str]:
        """The running attempt's environment and working directory (NoSuchAttempt, AttemptNotRunning)."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None:
            raise NoSuchAttempt(attempt_id)
        record = attempt.record
        context = None
        if record.running and not attempt.finished.is_set() and record.pid is not None:
            context = process_exec.task_context(record.pid, record.start_ticks)
        if context is None:
            raise AttemptNotRunning(attempt_id, "exited" if not record.running else "ending")
        return context

    def process_group(self, attempt_id: str) -> int | None:
        """The process group of a known attempt (for operators and tests)."""
        attempt = self._attempts.get(attempt_id)
        return attempt.record.pgid if attempt is not None else None

    # -- internals -------------------------------------------------------------------------------------

    def _readopt(self) -> None:
        for path in sorted(self._state_dir.glob("*.json")):
            record = attempt_record.load(path)
            if record is None:
                self._log.warning("unreadable attempt state file: ignored", extra={"path": str(path)})
                continue
            attempt = self._attempts[record.attempt_id] = _Attempt(record)
            if not record.running:
                attempt.finished.set()
            elif record.pid is not None and process_group.is_running(record.pid, record.start_ticks):
                self._log.info("re-adopted running attempt", extra=self._fields(record) | {"pid": record.pid})
                self._spawn(self._watch(attempt))
            else:
                self._log.warning("attempt ended while the agent was down", extra=self._fields(record))
                self._spawn(self._end_leftovers(attempt))

    async def _watch(self, attempt: _Attempt) -> None:
        pid, pgid = attempt.record.pid, attempt.record.pgid
        assert pid is not None and pgid is not None
        await process_group.wait_exit(pid)
        if attempt.proc is not None:
            attempt.returncode = attempt.proc.wait()
        if attempt.stopping:  # the rest of the group gets the stop's grace period too
            await process_group.wait_group_gone(pgid)
        else:  # the leader is gone: nothing of the attempt may stay
            await process_group.kill_group(pgid)
        self._finish(attempt, self._ended(attempt))

    async def _end_leftovers(self, attempt: _Attempt) -> None:
        # Members of the group keep its id from being reused, so whatever is still in it is ours.
        if attempt.record.pgid is not None:
            await process_group.kill_group(attempt.record.pgid)
        self._finish(attempt, self._ended(attempt))

    def _ended(self, attempt: _Attempt) -> AttemptRecord:
        rc = attempt.returncode
        if rc is None:  # a re-adopted group is not our child: its status comes from the file it left
            rc = _recorded_exit(Path(attempt.record.workdir))
        if rc is None:
            return attempt.record.lost(time.time())
        return attempt.record.exited(exit_code_of(rc), exit_reason_of(rc), time.time())

    def _finish(self, attempt: _Attempt, record: AttemptRecord) -> None:
        self._book.finish(attempt, record)
        for session in self._execs.pop(record.attempt_id, ()):  # nothing of an attempt outlives it
            self._spawn(session.kill())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    def _save(self, record: AttemptRecord) -> None:
        self._book.save(record)

    @staticmethod
    def _fields(record: AttemptRecord) -> dict[str, object]:
        return fields(record)


def _unused(cmd: StartTask) -> str | None:
    """What of the start command this runtime does not honour, for the task's exit diagnostics."""
    unused = [f"image {cmd.image} was not used"] if cmd.image else []
    unused += [f"storage {m.name} was not mounted at {m.mount_path} (on the host: {m.host_path})" for m in cmd.mounts]
    return f"the process runtime ran the command on the host: {'; '.join(unused)}" if unused else None
