"""The node agent: registers with the master, heartbeats every reply's interval, runs its commands.

Every request carries the report of every attempt the node knows (the master reconciles on each one);
an attempt's exit triggers a heartbeat at once. When the master cannot be reached the agent retries with
backoff and registers again; it never gives up and never crashes on the master's account. But once it has
had no reply for the node timeout it fences: it stops its tasks, because the master is about to requeue them
elsewhere (see ``fence.py``, which also covers an agent that dies).

Given several masters, the agent follows the leader (``masters.py``): a standby's NotLeaderError or a master out
of reach sends it to another one, where it registers again with its running attempts; its tasks keep running,
and only a real answer of a master renews the fencing timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pai.domain.localpaths import AGENT_TOKEN_FILE, AGENT_WORK_DIR, Protected
from pai.nodeagent.codefetch import DEFAULT_MAX_BYTES, CodeFetcher
from pai.nodeagent.diskguard import DiskGuard
from pai.nodeagent.docker_runtime import DockerRuntime, engine_answers
from pai.nodeagent.epoch import EpochMark
from pai.nodeagent.fence import spawn_watchdog
from pai.nodeagent.health import DEFAULT_MIN_FREE_DISK_MB, HealthCheck, kinds, with_disk
from pai.nodeagent.lease import Lease
from pai.nodeagent.logcap import DEFAULT_MAX_LOG_MB, DEFAULT_MAX_TASK_LOG_MB
from pai.nodeagent.logfmt import bind
from pai.nodeagent.logserver import LogServer
from pai.nodeagent.logwatch import LogWatch
from pai.nodeagent.master_client import MasterClient, MasterRefusedError, MasterUnavailableError, NotLeaderError
from pai.nodeagent.masters import Masters, Move, Reason
from pai.nodeagent.metrics import NodeMetrics
from pai.nodeagent.paths import AgentPaths
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.nodeagent.resources import NodeResources, Nvml, detect
from pai.nodeagent.runtime import Runtime
from pai.nodeagent.sshd import SshEndpoints
from pai.nodeagent.supervisor import DEFAULT_RETENTION_SECONDS, Supervisor
from pai.nodeagent.triallib import TrialLib
from pai.protocol import (
    ContainerReport,
    ContainerStatus,
    HeartbeatRequest,
    MasterReply,
    NodeInfo,
    PlatformExit,
    RegisterRequest,
    StartTask,
)

RUNTIMES = ("auto", "docker", "process")
MIN_HEARTBEAT_SECONDS = 0.05
FENCE_POLL_SECONDS = 0.5
STANDBY_RETRY_SECONDS = 1.0  # the longest wait between tries while masters answer that they do not lead


@dataclass(frozen=True, slots=True)
class AgentConfig:
    masters: tuple[str, ...]  # the masters' base URLs; the agent follows the leader among them (masters.py)
    name: str
    address: str
    work_dir: Path
    gpus: int | None = None  # None: detect (NVML), else 0
    cpus: int | None = None
    memory_mb: int | None = None
    gpu_type: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    log_port: int = 0  # 0: pick a free port
    runtime: str = "auto"  # docker where an engine answers, else process
    docker_host: str | None = None  # None: DOCKER_HOST or the default socket
    heartbeat_seconds: float = 1.0  # until the master's reply says otherwise
    token: str | None = None
    token_file: Path | None = None  # where the token was read from: no codeDir may overlap it
    kill_on_exit: bool = False  # stop every attempt when the agent exits (``pai up``)
    kill_grace_seconds: float = 5.0
    retention_seconds: float = DEFAULT_RETENTION_SECONDS
    code_max_bytes: int = DEFAULT_MAX_BYTES
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 30.0
    request_timeout_seconds: float = 10.0
    # Fencing, until the master's first reply says otherwise (see fence.py).
    node_timeout_seconds: float = 30.0
    fence_grace_seconds: float = 5.0
    watchdog: bool = True  # the lease watchdog process that stops the tasks if this agent dies
    min_free_disk_mb: int = DEFAULT_MIN_FREE_DISK_MB  # less free in the work directory: the node is unhealthy
    health_seconds: float = 5.0
    max_log_bytes: int = DEFAULT_MAX_LOG_MB << 20  # per log file of an attempt (logcap.py)
    max_task_log_bytes: int = DEFAULT_MAX_TASK_LOG_MB << 20  # all the log files of an attempt together
    log_cap_seconds: float = 0.25


def own_paths(cfg: AgentConfig) -> tuple[Protected, ...]:
    """This agent's paths that no codeDir may overlap: its work directory and its token file."""
    token = () if cfg.token_file is None else (Protected(str(cfg.token_file), AGENT_TOKEN_FILE),)
    return (Protected(str(cfg.work_dir), AGENT_WORK_DIR), *token)


class Agent:
    def __init__(self, config: AgentConfig, nvml: Nvml | None = None) -> None:
        if config.runtime not in RUNTIMES:
            raise ValueError(f"unknown runtime {config.runtime!r} (known: {', '.join(RUNTIMES)})")
        self.runtime_name = config.runtime if config.runtime != "auto" else ""
        self.config = config
        self.paths = AgentPaths(config.work_dir)
        self.log = bind(logging.getLogger("pai.nodeagent"), node=config.name)
        self.heartbeat_seconds = config.heartbeat_seconds
        self.log_port = config.log_port
        self.registered = asyncio.Event()  # set on every successful registration
        self._nvml = nvml
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._supervisor: Supervisor | None = None
        self._resources: NodeResources | None = None
        self._client: MasterClient | None = None
        self.masters = Masters(config.masters)
        self._listening: asyncio.Task[float] | None = None  # the channel to the current master (and its backoff)
        # Writes that fail for want of disk: one line per kind, and the node unhealthy at once (diskguard.py).
        self.disk = DiskGuard(config.work_dir, self.log, self._disk_alarm)
        self._loop_ref: asyncio.AbstractEventLoop | None = None
        self._lease = Lease(config.work_dir, uuid.uuid4().hex, on_error=self.disk.failed)
        self.epochs = EpochMark(config.work_dir, self.log, on_error=self.disk.failed)  # fencing deposed leaders
        self._watchdog: subprocess.Popen[bytes] | None = None
        self.node_timeout_seconds = config.node_timeout_seconds
        self.fence_grace_seconds = config.fence_grace_seconds
        self._fence_at = 0.0  # time.monotonic() past which, without a reply, the tasks are stopped
        self.fenced = False  # the tasks were stopped for want of the master; cleared by the next reply
        self.problems: tuple[str, ...] = ()  # the node's health problems, sent with every request
        self.ssh: SshEndpoints | None = None

    @property
    def supervisor(self) -> Supervisor:
        assert self._supervisor is not None, "the agent is not running"
        return self._supervisor

    def _running(self, attempt_id: str) -> bool:
        """Whether this node still runs the attempt (starting it counts); a follower of its log waits for the end."""
        reports = self.supervisor.reports()
        return any(r.attempt_id == attempt_id and r.status is ContainerStatus.RUNNING for r in reports)

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Run until :meth:`request_stop`; then stop the attempts only with ``kill_on_exit``."""
        cfg = self.config
        self._loop_ref = asyncio.get_running_loop()
        self._resources = await asyncio.to_thread(
            detect, gpus=cfg.gpus, cpus=cfg.cpus, memory=cfg.memory_mb, gpu_type=cfg.gpu_type,
            nvml=self._nvml, logger=self.log,
        )  # fmt: skip
        runtime = await self._open_runtime()
        fetcher = CodeFetcher(self.paths.code_cache, cfg.code_max_bytes, own_paths(cfg))
        self._supervisor = Supervisor(
            runtime, fetcher, self.paths, self.log, retention_seconds=cfg.retention_seconds, on_change=self._wake.set,
            disk=self.disk, master_url=lambda: self.masters.current,
        )
        self._fence_at = time.monotonic() + self.node_timeout_seconds
        self._lease.take_over(self._fence_at, self.fence_grace_seconds)
        if cfg.watchdog:
            state = self.paths.runtime_state(self.runtime_name)
            self._watchdog = spawn_watchdog(cfg.work_dir, self._lease.owner, state, self.runtime_name, cfg.docker_host,
                                            lease=self._lease)
        metrics = NodeMetrics(cfg.name, self._resources, runtime, cfg.work_dir, lambda: dict(self.disk.failures),
                              self.epochs, lambda: self.masters.current)
        log_server = LogServer(self.paths, cfg.address, cfg.log_port, cfg.token, metrics.render, runtime, self.log,
                               self._running)
        self.log_port = await log_server.start()
        self.ssh = SshEndpoints(runtime, self.paths, cfg.address, self.log)  # every running task's SSH endpoint
        await self.ssh.start()
        # a master that does not answer (frozen) costs a whole timeout: several must fit in the fencing window
        self._client = MasterClient(self.masters.current, cfg.token,
                                    min(cfg.request_timeout_seconds, self.node_timeout_seconds / 5))
        extra = {"master": ",".join(self.masters.urls), "log_port": self.log_port, "runtime": self.runtime_name,
                 "epoch": self.epochs.highest}
        self.log.info("agent started", extra=extra | {"resources": self._resources.total.describe()})
        engine = (lambda: engine_answers(cfg.docker_host)) if self.runtime_name == "docker" else None
        health = HealthCheck(cfg.work_dir, cfg.min_free_disk_mb, engine, self.disk.recent)
        self.problems = await asyncio.to_thread(health.problems)
        logs = LogWatch(self.paths, self.supervisor.reports, self.disk, self.log, max_file_bytes=cfg.max_log_bytes,
                        max_task_bytes=cfg.max_task_log_bytes)
        tasks = [asyncio.create_task(self._loop()), asyncio.create_task(self._fence_watch()),
                 asyncio.create_task(self._health_watch(health)), asyncio.create_task(logs.run(cfg.log_cap_seconds)),
                 asyncio.create_task(self._channel_watch()), asyncio.create_task(self.ssh.run(self.supervisor.reports))]
        try:
            await self._stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await self._shutdown(runtime, log_server)

    async def _open_runtime(self) -> Runtime:
        """The configured runtime; ``auto`` is docker where an engine answers, else process (said in the log)."""
        cfg = self.config
        if cfg.runtime == "auto":
            why_not = await asyncio.to_thread(engine_answers, cfg.docker_host)
            self.runtime_name = "process" if why_not else "docker"
            self.log.info(f"runtime {self.runtime_name}: " + (f"no Docker Engine ({why_not})" if why_not
                                                               else "a Docker Engine answers"))
        state = self.paths.runtime_state(self.runtime_name)
        trial_lib = TrialLib(self.paths.python)  # pai_trial for trials' tasks
        if self.runtime_name == "docker":
            assert self._resources is not None
            gpu_devices = self._resources.nvml.available and self._resources.total.gpu > 0
            return await DockerRuntime.open(state, self._on_exit, self.log, base_url=cfg.docker_host,
                                            gpu_devices=gpu_devices, disk=self.disk, trial_lib=trial_lib)
        return await ProcessRuntime.open(state, self._on_exit, self.log, self.disk, trial_lib=trial_lib)

    # -- the loop --------------------------------------------------------------------------------------

    async def _loop(self) -> None:
        backoff = self.config.backoff_seconds
        while True:
            move: Move | None = None
            try:
                await self._apply(await self._master.register(self._register_request()))
                self.log.info("registered with the master", extra={"heartbeat": self.heartbeat_seconds})
                self.registered.set()
                backoff = self.config.backoff_seconds
                while True:
                    await self._pause(self.heartbeat_seconds)
                    await self._apply(await self._master.heartbeat(self._heartbeat_request()))
            except NotLeaderError as e:
                move = self.masters.after(leader=e.leader)
                if move.url == self._master.base_url:  # the only master known: wait for one to lead
                    self.log.warning("the master is a standby and names no leader",
                                     extra={"master": move.url, "retry_in": round(backoff, 2)})
            except MasterUnavailableError as e:
                self.log.warning("master unavailable", extra={"master": self._master.base_url, "error": e.cause,
                                                              "retry_in": round(backoff, 2)})
                move = self.masters.after(unreachable=True)
            except MasterRefusedError as e:
                extra = {"status": e.status, "code": e.code, "error": e.message, "retry_in": round(backoff, 2)}
                if e.status == 401:
                    extra["hint"] = "give the agent the master's token: --token, PAI_AGENT_TOKEN or --token-file"
                self.log.error("master refused the request", extra=extra)
            except Exception:  # a bug here must not take the node's tasks down with the agent
                self.log.exception("agent loop failed", extra={"retry_in": round(backoff, 2)})
            self.registered.clear()
            if move is not None:
                self._follow(move)
                if move.at_once:
                    continue
            await asyncio.sleep(backoff * random.uniform(0.8, 1.2))
            # Never wait so long that a master back from an outage declares this node lost meanwhile; and while
            # masters answer that they do not lead (an election under way), ask again soon.
            cap = STANDBY_RETRY_SECONDS if move is not None and move.reason is not Reason.UNREACHABLE else math.inf
            backoff = min(backoff * 2, self.config.max_backoff_seconds, self.node_timeout_seconds / 5, cap)

    def _follow(self, move: Move) -> None:
        """Talk to ``move.url`` from now on: requests and the channel. The tasks and the fencing timer stay."""
        previous = self._master.base_url
        if move.url == previous:
            return
        self._master.base_url = move.url
        self.log.warning("following master", extra={"url": move.url, "from": previous, "reason": move.reason.value})
        if self._listening is not None:
            self._listening.cancel()  # the channel opens to the new master at once

    async def _channel_watch(self) -> None:
        """Keep the agent channel to the current master open: every poke of the master is a heartbeat now (its
        reply carries the commands). Without the channel the agent still works, at the pace of its heartbeats.
        When the agent moves to another master, :meth:`_follow` cancels the listening, and it starts over there."""
        backoff = self.config.backoff_seconds
        while True:
            self._listening = asyncio.create_task(self._listen(backoff))
            try:
                backoff = await self._listening
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # the agent stops
                backoff = self.config.backoff_seconds  # moved to another master

    async def _listen(self, backoff: float) -> float:
        """The channel to the current master until it closes or fails, then the backoff; the next backoff."""
        try:
            async for poke in self._master.channel(self.config.name):
                if not self.epochs.admit_poke(poke):
                    continue  # a deposed leader's
                if not self.registered.is_set():
                    continue  # the loop registers first; its register reply carries the commands
                self.log.debug("poked by the master", extra={"reason": poke.reason})
                backoff = self.config.backoff_seconds
                self._wake.set()
        except (MasterUnavailableError, MasterRefusedError) as e:
            self.log.debug("agent channel unavailable", extra={"error": str(e), "retry_in": round(backoff, 2)})
        except Exception:  # the channel is an accelerator: never let it take the agent down
            self.log.exception("agent channel failed", extra={"retry_in": round(backoff, 2)})
        await asyncio.sleep(backoff * random.uniform(0.8, 1.2))
        return min(backoff * 2, self.config.max_backoff_seconds, self.node_timeout_seconds / 5)

    async def _pause(self, seconds: float) -> None:
        """Wait for the next heartbeat: ``seconds``, or less when an attempt starts or ends or the master pokes.
        (``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for`` loses a cancellation that arrives as
        the event is set, and the agent then never stops.)"""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        self._wake.clear()

    async def _health_watch(self, health: HealthCheck) -> None:
        while True:
            await asyncio.sleep(self.config.health_seconds)
            problems = await asyncio.to_thread(health.problems)
            if problems != self.problems:
                self.log.warning("node health changed", extra={"problems": "; ".join(problems) or "none"})
                self.problems = problems
                self._wake.set()  # tell the master now

    def _disk_alarm(self) -> None:
        """A write failed for want of disk (called from any thread): report the node's disk now."""
        loop = self._loop_ref
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._disk_changed)

    def _disk_changed(self) -> None:
        """Report a new kind of problem at once; the periodic check keeps the figures up to date (a text that
        changed with every failed write would be a heartbeat and a write of the master each time)."""
        problems = with_disk(self.problems, self.disk.problem(self.config.min_free_disk_mb))
        if kinds(problems) != kinds(self.problems):
            self.log.warning("node health changed", extra={"problems": "; ".join(problems) or "none"})
            self.problems = problems
            self._wake.set()  # tell the master now

    async def _fence_watch(self) -> None:
        """Stop every task once the master has not answered for the node timeout: it is about to declare the
        node lost and run them elsewhere, and a task must never run twice."""
        while True:
            await asyncio.sleep(min(FENCE_POLL_SECONDS, self.heartbeat_seconds))
            silent = time.monotonic() - self._fence_at + self.node_timeout_seconds
            if self.fenced or silent <= self.node_timeout_seconds:
                continue
            self.fenced = True
            running = [r.attempt_id for r in self.supervisor.reports() if r.status is ContainerStatus.RUNNING]
            reason = (f"fenced: the node agent had no answer from the master for {silent:.0f}s (node timeout "
                      f"{self.node_timeout_seconds:g}s); the master runs the task elsewhere")
            self.log.warning("fencing: no answer from the master", extra={"silent": round(silent, 1),
                                                                         "attempts": ",".join(running)})
            await self.supervisor.stop_all(self.fence_grace_seconds, int(PlatformExit.NODE_LOST), reason)

    async def _apply(self, reply: MasterReply) -> None:
        if not self.epochs.admit(reply.epoch, reply.commands):
            # A deposed leader's: neither its commands run nor does its answer count as the master's for fencing
            # (the leader hears nothing from this node, and will run its tasks elsewhere after the node timeout).
            return
        self.masters.answered()
        self._fence_at = time.monotonic() + reply.node_timeout_seconds
        self.node_timeout_seconds, self.fence_grace_seconds = reply.node_timeout_seconds, reply.fence_grace_seconds
        self._lease.renew(self._fence_at, self.fence_grace_seconds)
        if self.fenced:
            self.log.info("the master answers again: no longer fenced")
            self.fenced = False
        self.heartbeat_seconds = max(reply.heartbeat_seconds, MIN_HEARTBEAT_SECONDS)
        for command in reply.commands:
            job = command.job_key if isinstance(command, StartTask) else None
            self.log.info(f"command {type(command).__name__}", extra={"attempt": command.attempt_id, "job": job})
            self.supervisor.submit(command)
        if reply.members:
            self.supervisor.members(reply.members)
        await asyncio.sleep(0)  # let the commands begin before the next report is built

    def _reports(self) -> tuple[ContainerReport, ...]:
        forgotten = self.supervisor.expire(time.time())
        if forgotten:
            self.log.info("forgot exited attempts", extra={"attempts": ",".join(forgotten)})
        return tuple(self.supervisor.reports())

    def _register_request(self) -> RegisterRequest:
        cfg, res = self.config, self._resources
        assert res is not None
        node = NodeInfo(
            name=cfg.name, address=cfg.address, resources=res.total, gpu_type=res.gpu_type,
            labels=dict(cfg.labels), log_port=self.log_port, runtime=self.runtime_name,
            gpu_memory_mb=res.gpu_memory_mb,
        )  # fmt: skip
        return RegisterRequest(node, self._reports(), res.gpu_health(), self.problems)

    def _heartbeat_request(self) -> HeartbeatRequest:
        assert self._resources is not None
        return HeartbeatRequest(self.config.name, self._reports(), self._resources.gpu_health(), self.problems)

    @property
    def _master(self) -> MasterClient:
        assert self._client is not None
        return self._client

    def _on_exit(self, report: ContainerReport) -> None:
        self._wake.set()
        if self.ssh is not None:
            self.ssh.poke()  # its endpoint closes now

    async def _shutdown(self, runtime: Runtime, log_server: LogServer) -> None:
        if self.config.kill_on_exit:
            self.log.info("stopping every attempt before exiting")
            await self.supervisor.stop_all(
                self.config.kill_grace_seconds, int(PlatformExit.CONTAINER_LOST), "the node agent shut down"
            )
            with contextlib.suppress(Exception):  # tell the master, if it is still there
                await asyncio.wait_for(self._master.heartbeat(self._heartbeat_request()), 2.0)
            self._lease.release()  # nothing left to guard
            if self._watchdog is not None:
                self._watchdog.terminate()
                await asyncio.to_thread(self._watchdog.wait)
        await log_server.close()  # first: its exec sessions end while the runtime can still kill them
        if self.ssh is not None:
            await self.ssh.close()  # so do the SSH sessions
        await self.supervisor.close()
        await runtime.close()
        await self._master.close()
        self._lease.close()
        self.log.info("agent stopped")
