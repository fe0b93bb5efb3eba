"""The docker runtime: every attempt is a container of its role's image, on the host network.

Per attempt: the image (pulled when absent, with the job's registry credentials when it has some; ``pull``
tells a registry that says "no such image", ``IMAGE_NOT_FOUND``, from one that could not be asked, retried
and then ``IMAGE_PULL_FAILED``), CPU,
memory (no swap) and ``/dev/shm`` limits from the spec, GPUs by device request with exactly the assigned
indices where the node has NVIDIA devices (``NVIDIA_VISIBLE_DEVICES`` always matches them, ``none`` for a
CPU task), docker's init as PID 1 so that signals reach the command, and labels carrying the job, role,
index, attempt and this agent (``pai.agent``: its state directory). Mounts: the attempt's ``code`` read-only
at ``/pai/code`` (the working directory when present), a writable ``/pai/work``, the job's storages (their
node directories at the job's mount paths; one that is not on the node fails the attempt), the job's secrets
read-only at OpenPAI's ``/usr/local/pai/secrets`` (``jobsecrets``), a trial's ``pai_trial`` read-only at
``/usr/local/pai/python``, first on its ``PYTHONPATH`` (``triallib``), and the attempt's
``stdout.log``/``stderr.log``, which the command writes straight to, so logs are on the node while it runs
and after the container is gone.

The engine is the state: a restarted agent lists its containers by label, re-adopts the running ones and
reports the ones that exited meanwhile with their real exit codes. An exit is recorded in the state directory
(as the process runtime does) before the container is removed. Exits are learnt from the engine's event
stream, read by one thread. Blocking SDK calls run in worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.types import DeviceRequest, Mount

from pai.nodeagent import attempt_record, jobsecrets, members, pull, sshlayout, triallib
from pai.nodeagent.attempt_record import AttemptRecord, exit_reason_of
from pai.nodeagent.attempts import Attempt, AttemptBook, fields
from pai.nodeagent.diskguard import DiskGuard
from pai.nodeagent.docker_exec import DockerExec
from pai.nodeagent.logfmt import BoundLogger
from pai.nodeagent.paths import check_attempt_id
from pai.nodeagent.runtime import ExitListener, TaskUsage
from pai.nodeagent.taskexec import AttemptNotRunning, ExecRequest, ExecSession, NoSuchAttempt, TaskFiles
from pai.protocol import ContainerReport, PlatformExit, StartTask

CODE, WORK, LOGS = "/pai/code", "/pai/work", "/pai/log"
# Inside the container: send the command's output to the attempt's log files on the node, then run it.
_WRAPPER = f'exec >>{LOGS}/stdout.log 2>>{LOGS}/stderr.log; exec sh -c "$1"'
LABEL = "pai.attempt"


def engine_answers(base_url: str | None = None, timeout: float = 2.0) -> str | None:
    """None when a Docker Engine answers at ``base_url`` (default: ``DOCKER_HOST`` or the default socket),
    else why not, in words."""
    try:
        client = docker.DockerClient(base_url=base_url, timeout=timeout) if base_url else docker.from_env(
            timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:  # no socket, no permission, not an engine
        return str(e) or type(e).__name__
    return None


@dataclass(eq=False)
class _Attempt(Attempt):
    container_id: str | None = None


class DockerRuntime:
    name = "docker"

    def __init__(self, state_dir: Path, on_exit: ExitListener | None = None, log: BoundLogger | None = None, *,
                 base_url: str | None = None, gpu_devices: bool = False,
                 pull_retry: pull.PullRetry | None = None, disk: DiskGuard | None = None,
                 trial_lib: triallib.TrialLib | None = None) -> None:
        """Use :meth:`open`, which also re-adopts this agent's containers. ``gpu_devices``: request GPUs from
        the engine (the node has NVIDIA devices); otherwise only ``NVIDIA_VISIBLE_DEVICES`` names them.
        ``pull_retry``: how often an unreachable registry is asked within an attempt. ``disk``: the agent's guard
        of its work directory (``diskguard.py``). ``trial_lib``: the agent's ``pai_trial`` for trials' tasks
        (None: they have none)."""
        self._trial_lib = trial_lib
        self._pull_retry = pull_retry or pull.PullRetry()
        self._book: AttemptBook[_Attempt] = AttemptBook(state_dir, on_exit, log, disk)
        self._state_dir = state_dir
        self._agent = str(state_dir.resolve())
        self._log = self._book.log
        self._gpu_devices = gpu_devices
        self._client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
        self._attempts = self._book.attempts
        self._loop: asyncio.AbstractEventLoop | None = None
        self._events: Any = None
        self._closed = threading.Event()
        self._checks: set[asyncio.Task[None]] = set()

    @classmethod
    async def open(cls, state_dir: Path, on_exit: ExitListener | None = None, log: BoundLogger | None = None, *,
                   base_url: str | None = None, gpu_devices: bool = False,
                   pull_retry: pull.PullRetry | None = None, disk: DiskGuard | None = None,
                   trial_lib: triallib.TrialLib | None = None) -> DockerRuntime:
        rt = cls(state_dir, on_exit, log, base_url=base_url, gpu_devices=gpu_devices, pull_retry=pull_retry,
                 disk=disk, trial_lib=trial_lib)
        rt._loop = asyncio.get_running_loop()
        threading.Thread(target=rt._watch_events, name="docker-events", daemon=True).start()
        await asyncio.to_thread(rt._client.ping)
        await rt._readopt()
        return rt

    # -- the Runtime interface -------------------------------------------------------------------------

    async def start(self, cmd: StartTask, workdir: Path) -> None:
        check_attempt_id(cmd.attempt_id)
        if cmd.attempt_id in self._attempts:
            return
        attempt = self._attempts[cmd.attempt_id] = _Attempt(AttemptRecord.for_command(cmd, workdir))
        failed = await pull.obtain_image(self._client, cmd.image, cmd.registry_auth, retry=self._pull_retry,
                                         log=self._log, fields=self._fields(attempt.record),
                                         stopping=lambda: attempt.stopping)
        if failed is not None or attempt.stopping:  # a stop during the pull: no container (the stop's code wins)
            code, reason = (failed.exit_code, failed.reason) if failed else (int(PlatformExit.STOPPED), None)
            self._finish(attempt, attempt.record.exited(code, reason, time.time()))
            return
        missing = [m for m in cmd.mounts if not Path(m.host_path).is_dir()]
        if missing:
            reason = "; ".join(f"storage {m.name!r}: {m.host_path} is not a directory on this node" for m in missing)
            self._finish(attempt, attempt.record.exited(int(PlatformExit.STORAGE_UNAVAILABLE), reason, time.time()))
            return
        try:
            container = await asyncio.to_thread(self._create_and_start, cmd, workdir)
        except (docker.errors.DockerException, OSError) as e:  # OSError: the attempt's files (secrets) on the node
            reason = f"the container could not start: {_short(e)}"
            code = self._book.start_failed(e) if isinstance(e, OSError) else PlatformExit.CONTAINER_START_FAILED
            self._finish(attempt, attempt.record.exited(int(code), reason, time.time()))
            return
        attempt.container_id = container
        attempt.record = attempt.record.started(0, None, time.time())
        self._save(attempt.record)
        self._log.info("attempt started", extra=self._fields(attempt.record) | {"container": container[:12]})
        await self._check_exited(attempt)  # a command that ended before the event stream saw it start

    async def stop(self, attempt_id: str, grace_seconds: float, exit_code: int | None = None,
                   reason: str | None = None) -> None:
        attempt = self._book.to_stop(attempt_id, grace_seconds, exit_code, reason)
        if attempt is None:
            return
        if attempt.container_id is not None:
            with contextlib.suppress(docker.errors.NotFound):  # SIGTERM, the grace period, SIGKILL
                await asyncio.to_thread(self._client.api.stop, attempt.container_id, timeout=max(0, int(grace_seconds)))
            await self._check_exited(attempt)
        await attempt.finished.wait()

    def reports(self) -> list[ContainerReport]:
        return self._book.reports()

    async def usage(self) -> list[TaskUsage]:
        """The engine's one-shot stats of every running container (CPU time of its cgroup, memory use less the
        page cache, as ``docker stats`` shows it), fetched concurrently; a container gone meanwhile is left out."""
        running = [a for a in self._attempts.values() if a.record.running and a.container_id]
        measured = await asyncio.gather(*(asyncio.to_thread(self._stats, a) for a in running))
        return [u for u in measured if u is not None]

    def _stats(self, attempt: _Attempt) -> TaskUsage | None:
        try:
            stats = self._client.api.stats(attempt.container_id, stream=False, one_shot=True)
        except Exception:  # gone, or the engine is busy: no figure this time
            return None
        cpu_ns = int(stats.get("cpu_stats", {}).get("cpu_usage", {}).get("total_usage", 0))
        memory = stats.get("memory_stats", {})
        cache = int(memory.get("stats", {}).get("inactive_file", memory.get("stats", {}).get("cache", 0)))
        return TaskUsage(attempt.record, cpu_ns / 1e9, max(0, int(memory.get("usage", 0)) - cache))

    def forget(self, attempt_id: str) -> None:
        self._book.forget(attempt_id)

    async def exec(self, attempt_id: str, req: ExecRequest) -> ExecSession:
        """``req`` in the attempt's container (``docker_exec``): its environment and user, its working directory
        unless ``req.cwd``. Ends when the container does."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None:
            raise NoSuchAttempt(attempt_id)
        if attempt.finished.is_set() or not attempt.record.running:
            raise AttemptNotRunning(attempt_id)
        if attempt.container_id is None:
            raise AttemptNotRunning(attempt_id, "its container is not started yet")
        try:
            return await DockerExec.start(self._client, attempt.container_id, req, self._log.bind(**self._fields(
                attempt.record)))
        except docker.errors.NotFound as e:
            raise AttemptNotRunning(attempt_id, "its container is gone") from e
        except docker.errors.APIError as e:
            if e.status_code == 409:  # the container is not running (any more)
                raise AttemptNotRunning(attempt_id, _short(e)) from e
            raise

    async def files(self, attempt_id: str) -> TaskFiles:
        """The container's root file system through its first process (``/proc/<pid>/root``: this agent must see
        the engine's processes), from the container's working directory."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None:
            raise NoSuchAttempt(attempt_id)
        if attempt.finished.is_set() or not attempt.record.running or attempt.container_id is None:
            raise AttemptNotRunning(attempt_id)
        try:
            found = await asyncio.to_thread(self._client.api.inspect_container, attempt.container_id)
        except docker.errors.NotFound as e:
            raise AttemptNotRunning(attempt_id, "its container is gone") from e
        pid = int(found["State"].get("Pid") or 0)
        if pid <= 0:
            raise AttemptNotRunning(attempt_id, "its container is not running")
        return TaskFiles(f"/proc/{pid}/root", found["Config"].get("WorkingDir") or "/")

    async def close(self) -> None:
        self._closed.set()
        if self._events is not None:
            with contextlib.suppress(Exception):
                self._events.close()
        await asyncio.to_thread(self._client.close)

    # -- starting --------------------------------------------------------------------------------------

    def _create_and_start(self, cmd: StartTask, workdir: Path) -> str:
        code = workdir / "code"
        work = workdir / "work"
        work.mkdir(parents=True, exist_ok=True)
        for stream in ("stdout.log", "stderr.log"):
            (workdir / stream).touch()
        mounts = [Mount(WORK, str(work), type="bind"),
                  Mount(f"{LOGS}/stdout.log", str(workdir / "stdout.log"), type="bind"),
                  Mount(f"{LOGS}/stderr.log", str(workdir / "stderr.log"), type="bind")]
        if code.is_dir():
            mounts.append(Mount(CODE, str(code), type="bind", read_only=True))
        mounts.extend(Mount(m.mount_path, m.host_path, type="bind", read_only=m.read_only) for m in cmd.mounts)
        gpus = ",".join(str(g) for g in cmd.gpus)
        env = {**cmd.env, "PAI_WORK_DIR": WORK, "PAI_CODE_DIR": CODE if code.is_dir() else "",
               "NVIDIA_VISIBLE_DEVICES": gpus or "none"}
        if cmd.secrets is not None:  # OpenPAI's secrets.yaml, where OpenPAI mounts it
            secrets = jobsecrets.write(workdir, cmd.secrets)
            mounts.append(Mount(jobsecrets.CONTAINER_DIR, str(secrets), type="bind", read_only=True))
            env[jobsecrets.ENV] = jobsecrets.CONTAINER_DIR
        if cmd.members is not None:  # its directory, so that the file the agent replaces is seen inside
            elastic = members.directory(workdir)
            elastic.mkdir(parents=True, exist_ok=True)
            mounts.append(Mount(members.CONTAINER_DIR, str(elastic), type="bind", read_only=True))
            env[members.ENV] = f"{members.CONTAINER_DIR}/{members.FILE}"
        ssh_dir = sshlayout.prepare(cmd, workdir, sshlayout.CONTAINER_DIR)  # the SSH endpoint's keys; jobssh's ~/.ssh
        if ssh_dir is not None:
            mounts.append(Mount(sshlayout.CONTAINER_DIR, str(ssh_dir), type="bind"))
            env[sshlayout.ENV] = sshlayout.CONTAINER_DIR
        if self._trial_lib is not None and triallib.is_trial(cmd):  # pai_trial first, then the job's or image's own
            mounts.append(Mount(triallib.CONTAINER_DIR, str(self._trial_lib.directory()), type="bind", read_only=True))
            theirs = cmd.env.get(triallib.ENV) or self._image_env(cmd, triallib.ENV)
            env[triallib.ENV] = triallib.pythonpath(triallib.CONTAINER_DIR, theirs)
        requests = [DeviceRequest(device_ids=gpus.split(","), capabilities=[["gpu"]])] if gpus and self._gpu_devices \
            else None
        memory = f"{cmd.resources.memory_mb}m"
        container = self._client.containers.create(
            cmd.image, ["sh", "-c", _WRAPPER, "pai-task", cmd.command],
            name=f"pai-{cmd.attempt_id}", labels=self._labels(cmd), environment=env, mounts=mounts,
            working_dir=CODE if code.is_dir() else WORK, network_mode="host", init=True,
            nano_cpus=int(cmd.resources.cpu * 1e9) or None, mem_limit=memory, memswap_limit=memory,
            shm_size=f"{cmd.shm_mb}m", device_requests=requests, stdin_open=False, detach=True,
        )
        container.start()
        return str(container.id)

    def _image_env(self, cmd: StartTask, name: str) -> str | None:
        """The value of ``name`` in the environment of the command's image; None when it has none or cannot be
        inspected (the image was there a moment ago: the engine blinked; said in the log)."""
        try:
            found = self._client.api.inspect_image(cmd.image)
        except Exception as e:
            extra = {"attempt": cmd.attempt_id, "job": cmd.job_key, "image": cmd.image, "error": _short(e)}
            self._log.warning("image environment unreadable", extra=extra)
            return None
        pairs = (str(e).partition("=") for e in (found.get("Config") or {}).get("Env") or ())
        return next((value for key, _, value in pairs if key == name), None) or None

    def _labels(self, cmd: StartTask) -> dict[str, str]:
        return {LABEL: cmd.attempt_id, "pai.job": cmd.job_key, "pai.role": cmd.role, "pai.index": str(cmd.index),
                "pai.agent": self._agent}

    # -- exits -----------------------------------------------------------------------------------------

    def _watch_events(self) -> None:
        """One thread: the engine's ``die`` events of this agent's containers, handed to the event loop."""
        while not self._closed.is_set():
            try:
                self._events = self._client.events(
                    decode=True, filters={"type": "container", "event": "die", "label": f"pai.agent={self._agent}"})
                for event in self._events:
                    attempt_id = (event.get("Actor") or {}).get("Attributes", {}).get(LABEL)
                    if attempt_id and self._loop is not None:
                        self._loop.call_soon_threadsafe(self._on_die, attempt_id)
            except Exception as e:  # the engine restarted or the stream broke: resubscribe, then resync
                if self._closed.is_set():
                    return
                self._log.warning("docker event stream broken: resubscribing", extra={"error": _short(e)})
                time.sleep(0.5)
                if self._loop is not None:
                    self._loop.call_soon_threadsafe(self._resync)

    def _on_die(self, attempt_id: str) -> None:
        attempt = self._attempts.get(attempt_id)
        if attempt is not None and not attempt.finished.is_set():
            self._spawn(self._check_exited(attempt))

    def _resync(self) -> None:
        for attempt in list(self._attempts.values()):
            if not attempt.finished.is_set() and attempt.container_id is not None:
                self._spawn(self._check_exited(attempt))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _check_exited(self, attempt: _Attempt) -> None:
        """If the attempt's container has exited: record how, remove the container, report."""
        if attempt.container_id is None or attempt.finished.is_set():
            return
        try:
            state = await asyncio.to_thread(self._state, attempt.container_id)
        except docker.errors.NotFound:
            state = None
        if state is not None and state.get("Running"):
            return
        if attempt.finished.is_set():  # another check got there first
            return
        if state is None:
            record = attempt.record.lost(time.time())
        else:
            record = attempt.record.exited(*_exit_of(state), time.time())
        self._finish(attempt, record)
        with contextlib.suppress(docker.errors.DockerException):
            await asyncio.to_thread(self._client.api.remove_container, attempt.container_id, force=True)

    def _state(self, container_id: str) -> dict[str, Any]:
        state: dict[str, Any] = self._client.api.inspect_container(container_id)["State"]
        return state

    def _finish(self, attempt: _Attempt, record: AttemptRecord) -> None:
        self._book.finish(attempt, record)

    # -- restarts --------------------------------------------------------------------------------------

    async def _readopt(self) -> None:
        """Exits recorded on disk, then this agent's containers: running ones are watched again, exited ones
        reported with their real exit codes."""
        for path in sorted(self._state_dir.glob("*.json")):
            record = attempt_record.load(path)
            if record is not None:
                attempt = self._attempts[record.attempt_id] = _Attempt(record)
                if not record.running:
                    attempt.finished.set()
        containers = await asyncio.to_thread(
            self._client.api.containers, all=True, filters={"label": f"pai.agent={self._agent}"})
        for c in containers:
            labels = c["Labels"]
            known = self._attempts.get(labels.get(LABEL, ""))
            if known is not None:
                attempt = known
            else:  # started by an agent that died before it wrote the record
                record = AttemptRecord(labels.get(LABEL, ""), labels.get("pai.job", ""), labels.get("pai.role", ""),
                                       int(labels.get("pai.index", "0")), "").started(0, None, time.time())
                attempt = self._attempts[record.attempt_id] = _Attempt(record)
            attempt.container_id = c["Id"]
            if attempt.finished.is_set():  # its exit was recorded before the container could be removed
                with contextlib.suppress(docker.errors.DockerException):
                    await asyncio.to_thread(self._client.api.remove_container, c["Id"], force=True)
                continue
            self._log.info("re-adopted container", extra=self._fields(attempt.record) | {"state": c.get("State")})
            await self._check_exited(attempt)
        for attempt in self._attempts.values():  # running on disk, gone from the engine
            if attempt.container_id is None and not attempt.finished.is_set():
                self._finish(attempt, attempt.record.lost(time.time()))

    def _save(self, record: AttemptRecord) -> None:
        self._book.save(record)

    @staticmethod
    def _fields(record: AttemptRecord) -> dict[str, object]:
        return fields(record)


def _exit_of(state: dict[str, Any]) -> tuple[int, str | None]:
    code = int(state.get("ExitCode", -1))
    if state.get("OOMKilled") and code != 0:
        return int(PlatformExit.OOM_KILLED), "killed by the kernel: the task went over its memoryMB"
    return code, exit_reason_of(code)


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__
