"""One SSH connection to a task's endpoint (asyncssh): who gets in, and what a session runs, inside the task.

- Authentication: public keys only, against the attempt's authorized keys (any user name: the session runs as the
  task's user, as ``pai exec`` does).
- A session's shell, command (``sh -c``) or terminal (with its size, window changes and TERM) runs in the task through
  the runtime's :class:`~pai.nodeagent.taskexec.ExecSession`, with the client's LANG, LC_* and COLORTERM; its exit
  status is the command's. The ``sftp`` subsystem runs ``pai.nodeagent.sftpchild`` in the task's files (modern
  ``scp`` uses it too).
- Local forwarding (``direct-tcpip``, as ``ssh -L`` and VS Code Remote-SSH use) to the task's own ports: 127.0.0.1,
  localhost or the node's address (tasks share the node's network). No remote forwarding, agent or X11.
- A session ends with its command; the connection's end (a client gone, the attempt ended) kills what its sessions
  started.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncssh

from pai.nodeagent.logfmt import BoundLogger
from pai.nodeagent.sftpchild import SftpSession
from pai.nodeagent.taskexec import STDERR, ExecError, ExecRequest, ExecSession, TaskFiles

PASSED_ENV = ("LANG", "COLORTERM")
STDIN_HIGH_WATER = 1 << 20  # bytes from the client not yet handed to the task: stop reading past this
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

Exec = Callable[[ExecRequest], Awaitable[ExecSession]]
Files = Callable[[], Awaitable[TaskFiles]]


@dataclass
class Task:
    """What the endpoint of one attempt serves: how to run in it, and the open connections (closed at its end)."""

    attempt_id: str
    address: str
    keys: asyncssh.SSHAuthorizedKeys
    exec: Exec
    files: Files
    log: BoundLogger
    connections: set[asyncssh.SSHServerConnection] = field(default_factory=set)


class TaskServer(asyncssh.SSHServer):
    def __init__(self, task: Task) -> None:
        self._task = task
        self._conn: asyncssh.SSHServerConnection | None = None
        self._peer = ""

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        peer = conn.get_extra_info("peername") or ("?", 0)
        self._peer = f"{peer[0]}:{peer[1]}"
        self._task.connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._task.connections.discard(self._conn)

    def begin_auth(self, username: str) -> bool:
        assert self._conn is not None
        self._conn.set_authorized_keys(self._task.keys)
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def auth_completed(self) -> None:
        self._task.log.info("ssh connection authenticated", extra={"peer": self._peer})

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
        allowed = dest_host in LOCAL_HOSTS or dest_host == self._task.address
        self._task.log.info("ssh port forwarding" if allowed else "ssh port forwarding refused",
                            extra={"peer": self._peer, "to": f"{dest_host}:{dest_port}"})
        if not allowed:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                                            f"only the task's own ports: 127.0.0.1, localhost, {self._task.address}")
        return True

    def server_requested(self, listen_host: str, listen_port: int) -> bool:
        return False

    def session_requested(self) -> asyncssh.SSHServerSession[bytes]:
        assert self._conn is not None
        return TaskSession(self._task, str(self._conn.get_extra_info("client_version") or ""), self._peer)


class TaskSession(asyncssh.SSHServerSession[bytes]):
    """One session channel: a shell, a command or SFTP, pumped between the channel and an ExecSession."""

    def __init__(self, task: Task, client_version: str, peer: str) -> None:
        self._task, self._client_version, self._peer = task, client_version, peer
        self._chan: asyncssh.SSHServerChannel[bytes] | None = None
        self._argv: tuple[str, ...] = ()
        self._sftp = False
        self._term: str | None = None
        self._size = (24, 80)
        self._session: ExecSession | None = None
        self._stdin: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._pending = 0
        self._writable = asyncio.Event()
        self._writable.set()
        self._runner: asyncio.Task[None] | None = None

    def connection_made(self, chan: asyncssh.SSHServerChannel[bytes]) -> None:
        self._chan = chan

    def pty_requested(self, term_type: str, term_size: tuple[int, int, int, int], term_modes: object) -> bool:
        self._term = term_type or None
        cols, rows = term_size[0], term_size[1]
        self._size = (rows or 24, cols or 80)
        return True

    def shell_requested(self) -> bool:
        return True

    def exec_requested(self, command: str) -> bool:
        self._argv = ("/bin/sh", "-c", command)
        return True

    def subsystem_requested(self, subsystem: str) -> bool:
        self._sftp = subsystem == "sftp"
        return self._sftp

    def session_started(self) -> None:
        self._runner = asyncio.get_running_loop().create_task(self._run())

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        self._stdin.put_nowait(data)
        self._pending += len(data)
        if self._pending > STDIN_HIGH_WATER and self._chan is not None:
            self._chan.pause_reading()

    def eof_received(self) -> bool:
        self._stdin.put_nowait(None)
        return True  # half-closed: the output goes on

    def terminal_size_changed(self, width: int, height: int, pixwidth: int, pixheight: int) -> None:
        if self._session is not None:
            asyncio.get_running_loop().create_task(self._session.resize(height, width))
        self._size = (height, width)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._writable.set()
        if self._runner is not None:
            self._runner.cancel()

    async def _open(self) -> ExecSession:
        if self._sftp:
            return await SftpSession.start(await self._task.files(), self._client_version)
        assert self._chan is not None
        client = self._chan.get_environment()
        env = {k: v for k, v in client.items() if k in PASSED_ENV or k.startswith("LC_")}
        if self._term:
            env["TERM"] = self._term
        rows, cols = self._size
        return await self._task.exec(ExecRequest(self._argv, tty=self._term is not None, rows=rows, cols=cols, env=env))

    async def _run(self) -> None:
        chan = self._chan
        assert chan is not None
        what = "sftp" if self._sftp else " ".join(self._argv)[:200] or "shell"
        opening = asyncio.ensure_future(self._open())
        try:
            self._session = session = await asyncio.shield(opening)
        except asyncio.CancelledError:  # the client left while the session started: it must not stay behind
            opening.add_done_callback(_kill_when_open)
            raise
        except ExecError as e:
            _say(chan, f"pai: {e.message}\r\n", 255)
            return
        except Exception as e:  # the engine refused, or is down: the node's trouble
            self._task.log.exception("ssh session failed to start", extra={"peer": self._peer})
            _say(chan, f"pai: the session could not start: {e}\r\n", 255)
            return
        self._task.log.info("ssh session started", extra={"peer": self._peer, "cmd": what, "tty": bool(self._term)})
        feeding = asyncio.get_running_loop().create_task(self._feed(session))
        code: int | None = None
        try:
            while (chunk := await session.read()) is not None:
                await self._writable.wait()
                kind, data = chunk
                chan.write(data, asyncssh.EXTENDED_DATA_STDERR if kind == STDERR else None)
            code = await session.wait()
            chan.exit(code & 0xFF)
        except (BrokenPipeError, ConnectionError, asyncssh.Error):
            pass
        finally:
            feeding.cancel()
            await asyncio.shield(session.kill())
            self._task.log.info("ssh session ended", extra={"peer": self._peer, "cmd": what, "exit_code": code})

    async def _feed(self, session: ExecSession) -> None:
        """The client's input to the task, then its EOF."""
        while (data := await self._stdin.get()) is not None:
            await session.write(data)
            self._pending -= len(data)
            if self._pending <= STDIN_HIGH_WATER // 2 and self._chan is not None:
                self._chan.resume_reading()
        await session.close_stdin()


def _say(chan: asyncssh.SSHServerChannel[bytes], message: str, status: int) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionError, asyncssh.Error):
        chan.write_stderr(message.encode())
        chan.exit(status)


_killing: set[asyncio.Task[None]] = set()


def _kill_when_open(opening: asyncio.Future[ExecSession]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        task = asyncio.get_running_loop().create_task(opening.result().kill())
        _killing.add(task)
        task.add_done_callback(_killing.discard)
