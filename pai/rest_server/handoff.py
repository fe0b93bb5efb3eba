"""The link between the read front and the master, beside the master's Unix socket: connections handed over, and
the generations of the master's caches.

Handed over. A request that writes (a submission, a stop, an agent's heartbeat) or opens a WebSocket is the
master's to answer. Passing it through costs the front's event loop time on every request, and during a burst the
master's answers come back many at once, with a page of the job list queued behind them (``bench/api_lists.py``;
the figures: docs/architecture.md). So the front hands the connection itself to the master: its socket
(``SCM_RIGHTS`` on the SOCK_SEQPACKET socket ``master.handoff``) with the request's bytes as the front read them,
and closes its own copy. The master serves that connection from then on as if it had accepted it: the answer, the
requests that follow on it, a WebSocket's frames. The front passes a request through instead when it cannot hand
it over: more than ``MAX_HANDOFF_BYTES``, a client that already sent its next request (pipelining), the master not
listening yet, its queue full. One limit: a client that pipelines a request right after one handed over, before
the master has taken the socket, may have it read before the one handed over; HTTP clients wait for an answer.

Generations. The master publishes how many times it has forgotten its cached users and tokens and its cached
cluster configuration (``Launcher.watch_caches``) in ``master.generations``, 16 bytes mapped into both processes,
before it answers the request that changed them. The front reads them before every request and forgets its own
copy of each that moved, so a revoked token is refused on the next request to either process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mmap
import os
import socket
import struct

from aiohttp import web

from pai.launcher.service import Launcher
from pai.rest_server.keys import LAUNCHER

log = logging.getLogger("pai.master.handoff")

HANDOFF = "master.handoff"
GENERATIONS = "master.generations"
MAX_HANDOFF_BYTES = 64 * 1024  # a request of more bytes passes through
_LAYOUT = struct.Struct("<QQ")  # accounts, cluster configuration
_SKIPPED = frozenset({b"content-length", b"transfer-encoding", b"expect"})  # the body goes as read, with its length


def link_paths(master_socket: str) -> tuple[str, str]:
    """The handoff socket's path and the generations' file, beside the master's Unix socket."""
    directory = os.path.dirname(master_socket)
    return os.path.join(directory, HANDOFF), os.path.join(directory, GENERATIONS)


def request_bytes(request: web.BaseRequest, body: bytes | None) -> bytes:
    """The request as the master's parser reads it: its line and headers as they came, and the body as the front
    read it (de-chunked; its length)."""
    version = request.version
    lines = [f"{request.method} {request.raw_path} HTTP/{version.major}.{version.minor}".encode()]
    lines += [name + b": " + value for name, value in request.raw_headers if name.lower() not in _SKIPPED]
    if body is not None:
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


class MasterLink:
    """The master's end: publishes its caches' generations, adopts the connections the front hands over."""

    def __init__(self, master_socket: str) -> None:
        self.handoff_path, self.generations_path = link_paths(master_socket)
        self.adopted = 0  # connections taken over so far
        self._map: mmap.mmap | None = None
        self._listener: socket.socket | None = None
        self._channels: list[socket.socket] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, runner: web.AppRunner) -> None:
        """After ``runner.setup()``: the generations of its app's launcher, and the handoff socket for its server."""
        launcher, server = runner.app[LAUNCHER], runner.server
        assert server is not None, "the runner is set up"
        fd = os.open(self.generations_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, _LAYOUT.size)
            self._map = mmap.mmap(fd, _LAYOUT.size)
        finally:
            os.close(fd)
        self._publish(launcher)
        launcher.watch_caches(lambda: self._publish(launcher))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.handoff_path)  # left by a master that was killed
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(self.handoff_path)
        os.chmod(self.handoff_path, 0o600)  # as the master's socket: this user's processes only
        listener.listen()
        listener.setblocking(False)
        self._listener = listener
        asyncio.get_running_loop().add_reader(listener, self._accept, server)

    def _publish(self, launcher: Launcher) -> None:
        if self._map is not None:
            _LAYOUT.pack_into(self._map, 0, *launcher.cache_generations())

    def _accept(self, server: web.Server) -> None:
        assert self._listener is not None
        try:
            channel, _ = self._listener.accept()
        except BlockingIOError:
            return
        channel.setblocking(False)
        self._channels.append(channel)
        asyncio.get_running_loop().add_reader(channel, self._receive, channel, server)

    def _receive(self, channel: socket.socket, server: web.Server) -> None:
        try:
            data, fds, flags, _ = socket.recv_fds(channel, MAX_HANDOFF_BYTES, 1)
        except BlockingIOError:
            return
        except OSError:
            data, fds, flags = b"", [], 0
        if not fds:
            if not data:  # the front closed its end
                asyncio.get_running_loop().remove_reader(channel)
                self._channels.remove(channel)
                channel.close()
            return
        sock = socket.socket(fileno=fds[0])
        if flags & socket.MSG_TRUNC:  # cannot happen from our front; the client gets a closed connection
            log.warning("a handed over request was cut short; its connection is closed")
            sock.close()
            return
        task = asyncio.create_task(self._adopt(server, sock, data), name="adopt a connection")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _adopt(self, server: web.Server, sock: socket.socket, data: bytes) -> None:
        sock.setblocking(False)
        try:
            _, protocol = await asyncio.get_running_loop().connect_accepted_socket(server, sock)
        except OSError:  # the client went away meanwhile
            sock.close()
            return
        protocol.data_received(data)
        self.adopted += 1

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        for sock in [*self._channels, *([self._listener] if self._listener else [])]:
            loop.remove_reader(sock)
            sock.close()
        self._channels.clear()
        self._listener = None
        for path in (self.handoff_path, self.generations_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        if self._map is not None:
            self._map.close()
            self._map = None


class FrontLink:
    """The front's end: reads the master's generations, hands connections over."""

    def __init__(self, master_socket: str) -> None:
        self.handoff_path, self.generations_path = link_paths(master_socket)
        self._map: mmap.mmap | None = None
        self._channel: socket.socket | None = None

    def generations(self) -> tuple[int, int] | None:
        """The master's cache generations; None while it has published none."""
        if self._map is None:
            try:
                with open(self.generations_path, "rb") as f:
                    self._map = mmap.mmap(f.fileno(), _LAYOUT.size, prot=mmap.PROT_READ)
            except (OSError, ValueError):
                return None
        first, second = _LAYOUT.unpack_from(self._map)
        return int(first), int(second)

    def hand_over(self, request: web.Request, body: bytes | None) -> bool:
        """Hand ``request``'s connection, with the request, to the master; False where it cannot be (nothing done:
        pass it through)."""
        data = request_bytes(request, body)
        sock = request.transport.get_extra_info("socket") if request.transport is not None else None
        if sock is None or len(data) > MAX_HANDOFF_BYTES or _pipelined(request):
            return False
        channel = self._connected()
        if channel is None:
            return False
        fd = os.dup(sock.fileno())
        try:
            socket.send_fds(channel, [data], [fd])
        except BlockingIOError:  # the master's queue is full: this one passes through
            return False
        except OSError:  # the master ended: a new one may listen by the next request
            self._drop()
            return False
        finally:
            os.close(fd)
        request.protocol.force_close()  # only the front's copy: the connection lives on in the master
        return True

    def _connected(self) -> socket.socket | None:
        if self._channel is None:
            channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                channel.connect(self.handoff_path)
            except OSError:
                channel.close()
                return None
            channel.setblocking(False)
            self._channel = channel
        return self._channel

    def _drop(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def close(self) -> None:
        self._drop()
        if self._map is not None:
            self._map.close()
            self._map = None


def _pipelined(request: web.Request) -> bool:
    """Whether the front has read bytes past this request (the next one's): those could not go with it."""
    protocol = request.protocol
    return bool(getattr(protocol, "_messages", None)) or bool(getattr(protocol, "_message_tail", b""))

