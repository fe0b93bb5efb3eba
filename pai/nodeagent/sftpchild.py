"""SFTP in a task's file system, in a process of its own: ``python -m pai.nodeagent.sftpchild ROOT HOME CLIENT``.

The SSH endpoint (``pai.nodeagent.sshsession``) starts one per SFTP session and pipes the session's bytes through
its stdin and stdout; asyncssh's SFTP server speaks the protocol. Into a container's files (ROOT is
``/proc/<pid>/root``) the process ``chroot``s first, so that the kernel resolves every path, and every symbolic link
the task made, inside the container: a path-rewriting server in the agent would follow an absolute link out to the
node's own files, as root. It imports everything before it changes its root, and serves from HOME (the task's
working directory). CLIENT is the client's version string (asyncssh adjusts to OpenSSH's SYMLINK order).

:class:`SftpSession` is the agent's side: an :class:`~pai.nodeagent.taskexec.ExecSession` whose command is this
process, so the endpoint pumps it as it pumps a shell.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

import asyncssh
from asyncssh.logging import logger as ssh_logger
from asyncssh.sftp import SFTPServerHandler

from pai.nodeagent.taskexec import STDERR, STDOUT, TaskFiles

SFTP_VERSION = 3
CHUNK = 65536


class _Channel:
    """What asyncssh's SFTP handler asks of its channel."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()

    def is_closing(self) -> bool:
        return self.closed.is_set()

    async def wait_closed(self) -> None:
        await self.closed.wait()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class _Reader:
    def __init__(self, stream: asyncio.StreamReader, client_version: str) -> None:
        self._stream, self._client = stream, client_version
        self.logger = ssh_logger
        self.channel = _Channel()

    async def readexactly(self, n: int) -> bytes:
        return await self._stream.readexactly(n)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._client if name == "client_version" else default


class _Writer:
    def __init__(self, out: Any, channel: _Channel) -> None:
        self._out, self.channel = out, channel

    def write(self, data: bytes) -> None:
        if not self.channel.is_closing():
            _write_all(self._out, data)  # blocking: this process serves this one stream

    def write_eof(self) -> None:
        self.close()

    def close(self) -> None:
        if not self.channel.is_closing():
            self.channel.closed.set()
            with contextlib.suppress(OSError):
                os.close(self._out)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


async def _serve(client_version: str) -> None:
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(0, "rb", buffering=0))
    reader = _Reader(stream, client_version)
    writer = _Writer(1, reader.channel)
    server = asyncssh.SFTPServer(None)  # type: ignore[arg-type]  # the channel is used for env/connection only
    handler = SFTPServerHandler(server, reader, writer, SFTP_VERSION)  # type: ignore[arg-type]
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        await handler.run()


def main(argv: list[str]) -> int:
    root, home, client_version = argv
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        if root != "/":
            os.chroot(root)
            os.chdir("/")
        os.chdir(home)
    except OSError as e:
        print(f"sftp: cannot enter the task's files ({root}, {home}): {e.strerror}", file=sys.stderr)
        return 1
    asyncio.run(_serve(client_version))
    return 0


class SftpSession:
    """The agent's side of an SFTP process: stdin and stdout are the SFTP stream, stderr its complaints."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self._out: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue(16)
        self._pumps = [asyncio.create_task(self._pump(proc.stdout, STDOUT)),
                       asyncio.create_task(self._pump(proc.stderr, STDERR))]
        self._open = 2

    @classmethod
    async def start(cls, files: TaskFiles, client_version: str) -> SftpSession:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-P", "-m", "pai.nodeagent.sftpchild", files.root, files.home, client_version,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
            start_new_session=True)
        return cls(proc)

    async def _pump(self, stream: asyncio.StreamReader | None, kind: int) -> None:
        assert stream is not None
        while data := await stream.read(CHUNK):
            await self._out.put((kind, data))
        await self._out.put(None)

    async def write(self, data: bytes) -> None:
        stdin = self._proc.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(ConnectionError):
                stdin.write(data)
                await stdin.drain()

    async def close_stdin(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()

    async def read(self) -> tuple[int, bytes] | None:
        while self._open:
            chunk = await self._out.get()
            if chunk is not None:
                return chunk
            self._open -= 1
        return None

    async def resize(self, rows: int, cols: int) -> None:
        """An SFTP session has no terminal."""

    async def wait(self) -> int:
        code = await self._proc.wait()
        return code if code >= 0 else 128 - code

    async def kill(self) -> None:
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await self._proc.wait()
        for pump in self._pumps:
            pump.cancel()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
