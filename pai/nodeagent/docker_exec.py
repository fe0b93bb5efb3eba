"""Exec for the docker runtime: the Docker Engine's exec API, with the stream read and written asynchronously.

``exec_create`` in the task's container (the container's environment, user and working directory unless the
request names one), then ``/exec/{id}/start`` upgraded to a raw stream (with the terminal's size when tty), which
is handed to the event loop. Without a tty the engine multiplexes stdout and stderr on it, each frame behind an
8-byte header (stream, 0, 0, 0, size as 4 bytes big-endian); with a tty it is the terminal's bytes. Half-closing
the stream closes the command's stdin.

:meth:`DockerExec.kill` kills the exec's process (``exec_inspect``'s Pid) and its descendants through /proc.
That needs the agent in the engine's pid namespace with the right to signal the task's processes (root on the
node, or a container with ``--pid host``); where the Pid is not a process of the task's container as the agent
sees it, nothing is signalled and a warning says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
from typing import Any

import docker
import docker.errors

from pai.nodeagent import process_group
from pai.nodeagent.logfmt import BoundLogger
from pai.nodeagent.taskexec import STDERR, STDOUT, ExecRequest, command, exec_env

CHUNK = 65536
CTRL_D = b"\x04"
KILLED = 137  # the code of an exec whose container went away under it (128 + SIGKILL)
POLL_SECONDS = 0.01
_STREAMS = {1: STDOUT, 2: STDERR, 3: STDERR}  # 3: the engine's own error stream


class DockerExec:
    """An :class:`~pai.nodeagent.taskexec.ExecSession` of an exec in a container; use :meth:`start`."""

    def __init__(self, client: docker.DockerClient, container_id: str, exec_id: str, tty: bool,
                 streams: tuple[asyncio.StreamReader, asyncio.StreamWriter], pending: bytes, log: BoundLogger) -> None:
        self._client = client
        self._container = container_id
        self.exec_id = exec_id
        self._tty = tty
        self._reader, self._writer = streams
        self._pending = pending  # what the HTTP client read past the upgrade's response
        self._log = log
        self._exit: int | None = None
        self._eof = False
        self._killed = False

    @classmethod
    async def start(cls, client: docker.DockerClient, container_id: str, req: ExecRequest,
                    log: BoundLogger) -> DockerExec:
        """docker.errors.NotFound when the container is gone, APIError when the engine refuses."""
        created = await asyncio.to_thread(
            client.api.exec_create, container_id, list(command(req)), stdin=True, tty=req.tty,
            environment=exec_env(req) or None, workdir=req.cwd)
        exec_id = str(created["Id"])
        sock, pending = await asyncio.to_thread(_start, client, exec_id, req)
        try:
            streams = await asyncio.open_connection(sock=sock, limit=CHUNK)
        except BaseException:
            sock.close()
            raise
        session = cls(client, container_id, exec_id, req.tty, streams, pending, log)
        if req.tty:  # engines before API 1.42 ignore ConsoleSize (the engine waits for the exec to have started)
            await session.resize(req.rows, req.cols)
        return session

    async def write(self, data: bytes) -> None:
        if self._killed or self._eof or self._writer.is_closing():
            return
        with contextlib.suppress(ConnectionError):
            self._writer.write(data)
            await self._writer.drain()

    async def close_stdin(self) -> None:
        if self._tty:
            await self.write(CTRL_D)
        elif not self._eof and not self._writer.is_closing() and self._writer.can_write_eof():
            with contextlib.suppress(OSError):
                self._writer.write_eof()
        self._eof = True

    async def read(self) -> tuple[int, bytes] | None:
        try:
            if self._tty:
                data = self._take(CHUNK) or await self._reader.read(CHUNK)
                return (STDOUT, data) if data else None
            while True:  # frames of stdin (0) or of nothing are skipped
                stream, size = struct.unpack(">BxxxL", await self._exactly(8))
                data = await self._exactly(size)
                if stream in _STREAMS and data:
                    return _STREAMS[stream], data
        except (asyncio.IncompleteReadError, ConnectionError):
            return None

    async def resize(self, rows: int, cols: int) -> None:
        if self._tty and not self._killed:
            with contextlib.suppress(docker.errors.APIError):  # it has just ended
                await asyncio.to_thread(self._client.api.exec_resize, self.exec_id, height=rows, width=cols)

    async def wait(self) -> int:
        while self._exit is None:
            try:
                state = await asyncio.to_thread(self._client.api.exec_inspect, self.exec_id)
            except docker.errors.NotFound:  # removed with its container
                self._exit = KILLED
                break
            if not state.get("Running") and state.get("ExitCode") is not None:
                self._exit = int(state["ExitCode"])
                break
            await asyncio.sleep(POLL_SECONDS)
        return self._exit

    async def kill(self) -> None:
        if not self._killed and self._exit is None:  # after wait() there is nothing to find: its process is gone
            with contextlib.suppress(docker.errors.DockerException):
                state = await asyncio.to_thread(self._client.api.exec_inspect, self.exec_id)
                if state.get("Running") and state.get("Pid"):
                    await self._kill_tree(int(state["Pid"]))
        self._killed = True
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()

    # -- internals -------------------------------------------------------------------------------------

    async def _kill_tree(self, pid: int) -> None:
        inspect = await asyncio.to_thread(self._client.api.inspect_container, self._container)
        init = int(inspect["State"].get("Pid") or 0)
        if not init or _pid_namespace(pid) is None or _pid_namespace(pid) != _pid_namespace(init):
            self._log.warning("exec's processes not killed: its pid is not seen in its container (the agent needs the "
                              "engine's pid namespace)", extra={"exec": self.exec_id[:12], "pid": pid})
            return
        if denied := await process_group.kill_tree(pid):
            self._log.warning("exec's processes not killed: not permitted (the agent needs root on the node)",
                              extra={"exec": self.exec_id[:12], "pids": ",".join(map(str, denied))})

    def _take(self, n: int) -> bytes:
        data, self._pending = self._pending[:n], self._pending[n:]
        return data

    async def _exactly(self, n: int) -> bytes:
        head = self._take(n)
        return head + await self._reader.readexactly(n - len(head)) if len(head) < n else head


def _pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(process_group.PROC / str(pid) / "ns" / "pid")
    except OSError:
        return None


def _start(client: docker.DockerClient, exec_id: str, req: ExecRequest) -> tuple[socket.socket, bytes]:
    """Start the exec (blocking): its stream as a socket of our own, and the bytes of it already read."""
    api: Any = client.api
    body: dict[str, object] = {"Tty": req.tty, "Detach": False}
    if req.tty:  # the size from the start (API 1.42): a shell that asks at once gets the right answer
        body["ConsoleSize"] = [req.rows, req.cols]
    # As APIClient.exec_start(socket=True), which cannot send ConsoleSize.
    response = api._post_json(api._url("/exec/{0}/start", exec_id), headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                              data=body, stream=True)
    try:
        raw = api._get_raw_response_socket(response)
        sock: socket.socket = getattr(raw, "_sock", raw)
        sock.setblocking(False)  # so that peek() below returns what is buffered without waiting for more
        buffered = response.raw._fp.fp
        pending = bytes(buffered.peek()) if hasattr(buffered, "peek") else b""
        ours = socket.socket(sock.family, sock.type, sock.proto, fileno=os.dup(sock.fileno()))
    finally:
        response.close()
    return ours, pending
