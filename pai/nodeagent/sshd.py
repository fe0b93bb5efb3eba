"""The node's SSH endpoints: one asyncssh server per running attempt whose start asked for one, so that no sshd is
needed in the task's image.

Each listens on the node's address at the attempt's ``ssh`` port, with the keys and the port its start left in the
attempt's directory (``pai.nodeagent.sshlayout``: so an agent restarted while the task runs serves it again), and
runs what its clients ask for inside the task (``pai.nodeagent.sshsession``). It stops listening, and closes its
connections (killing what they started), once the attempt is no longer running. The host key is the node's, one for
all its endpoints, made on the agent's first start: ``<work-dir>/ssh_host_ed25519_key``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import asyncssh

from pai.nodeagent import sshlayout
from pai.nodeagent.logfmt import BoundLogger
from pai.nodeagent.paths import AgentPaths
from pai.nodeagent.runtime import Runtime
from pai.nodeagent.sshsession import Task, TaskServer
from pai.nodeagent.taskexec import ExecRequest, ExecSession, TaskFiles
from pai.protocol import ContainerReport, ContainerStatus

HOST_KEY_FILE = "ssh_host_ed25519_key"
POLL_SECONDS = 0.5  # how soon a started attempt is served, and an ended one no longer
RETRY_SECONDS = 5.0  # after a port that could not be listened on
KEEPALIVE_SECONDS = 30.0  # a client gone without a word is dropped after three of these unanswered
PREPARING = "fetching code"  # the supervisor's reason for an attempt the runtime does not have yet


def host_key(path: Path) -> asyncssh.SSHKey:
    """The node's host key: read, or made (Ed25519, mode 0600) when there is none."""
    if path.exists():
        return asyncssh.read_private_key(path)
    key = asyncssh.generate_private_key("ssh-ed25519")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.export_private_key())
    os.replace(tmp, path)
    return key


def authorized_keys(lines: tuple[str, ...], log: BoundLogger) -> asyncssh.SSHAuthorizedKeys:
    """The keys an endpoint lets in; a line asyncssh cannot read is left out (and said in the log)."""
    good = []
    for line in lines:
        try:
            asyncssh.import_authorized_keys(line)
        except (asyncssh.KeyImportError, ValueError) as e:
            log.warning("ssh: an authorized key is not usable, left out", extra={"key": line[:40], "error": str(e)})
            continue
        good.append(line)
    return asyncssh.import_authorized_keys("\n".join(good) + "\n")


class SshEndpoints:
    def __init__(self, runtime: Runtime, paths: AgentPaths, address: str, log: BoundLogger) -> None:
        self._runtime, self._paths, self._address, self._log = runtime, paths, address, log
        self._key: asyncssh.SSHKey | None = None
        self._served: dict[str, tuple[asyncssh.SSHAcceptor, Task]] = {}
        self._opening: dict[str, asyncio.Task[None]] = {}
        self._failed: dict[str, float] = {}  # attempt -> when listening last failed (time.monotonic)
        self._poke = asyncio.Event()
        # asyncssh says every connection's steps at INFO; the endpoint's own lines (sshsession) say what matters
        logging.getLogger("asyncssh").setLevel(logging.WARNING)

    async def start(self) -> None:
        self._key = await asyncio.to_thread(host_key, self._paths.root / HOST_KEY_FILE)

    def port_of(self, attempt_id: str) -> int | None:
        """The port an attempt is served on; None while it is not (for tests and operators)."""
        served = self._served.get(attempt_id)
        return None if served is None else int(served[0].get_port())

    def poke(self) -> None:
        """Look at the attempts now (one has ended, or started)."""
        self._poke.set()

    async def run(self, reports: Callable[[], list[ContainerReport]]) -> None:
        """Follow the attempts ``reports`` gives until cancelled."""
        while True:
            self.sync(reports())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_SECONDS):
                    await self._poke.wait()
            self._poke.clear()

    def sync(self, reports: list[ContainerReport]) -> None:
        """Serve every running attempt that has an endpoint, and no other."""
        running = {r.attempt_id: r for r in reports if r.status is ContainerStatus.RUNNING and r.reason != PREPARING}
        now = time.monotonic()
        for attempt_id, report in running.items():
            if attempt_id in self._served or attempt_id in self._opening:
                continue
            if now - self._failed.get(attempt_id, -RETRY_SECONDS) < RETRY_SECONDS:
                continue
            endpoint = sshlayout.endpoint(self._paths.attempt(attempt_id))
            if endpoint is not None:
                task = asyncio.get_running_loop().create_task(self._open(report, endpoint))
                self._opening[attempt_id] = task
        for attempt_id in [a for a in self._served if a not in running]:
            acceptor, task_ = self._served.pop(attempt_id)
            asyncio.get_running_loop().create_task(self._close(acceptor, task_))
        for attempt_id in [a for a in self._failed if a not in running]:
            del self._failed[attempt_id]

    async def _open(self, report: ContainerReport, endpoint: sshlayout.Endpoint) -> None:
        attempt_id = report.attempt_id
        log = self._log.bind(attempt=attempt_id, job=report.job_key)
        runtime = self._runtime

        async def exec_(req: ExecRequest) -> ExecSession:
            return await runtime.exec(attempt_id, req)

        async def files() -> TaskFiles:
            return await runtime.files(attempt_id)

        assert self._key is not None, "start() first"
        task = Task(attempt_id, self._address, authorized_keys(endpoint.authorized_keys, log), exec_, files, log)
        try:
            acceptor = await asyncssh.listen(
                self._address, endpoint.port, server_factory=lambda: TaskServer(task),
                server_host_keys=[self._key], encoding=None, allow_scp=False, agent_forwarding=False,
                x11_forwarding=False, keepalive_interval=KEEPALIVE_SECONDS, keepalive_count_max=3,
                server_version="pai")
        except OSError as e:
            self._failed[attempt_id] = time.monotonic()
            log.warning("ssh: cannot listen", extra={"address": f"{self._address}:{endpoint.port}", "error": str(e)})
            return
        finally:
            self._opening.pop(attempt_id, None)
        self._served[attempt_id] = (acceptor, task)
        log.info("ssh endpoint listening", extra={"address": f"{self._address}:{endpoint.port}",
                                                  "keys": len(endpoint.authorized_keys)})

    async def _close(self, acceptor: asyncssh.SSHAcceptor, task: Task) -> None:
        acceptor.close()
        for conn in list(task.connections):
            conn.close()
        await acceptor.wait_closed()
        for conn in list(task.connections):
            await conn.wait_closed()
        task.log.info("ssh endpoint closed")

    async def close(self) -> None:
        """Stop every endpoint (the agent is stopping)."""
        for opening in list(self._opening.values()):
            opening.cancel()
        served, self._served = self._served, {}
        await asyncio.gather(*(self._close(acceptor, task) for acceptor, task in served.values()),
                             return_exceptions=True)
