"""Exec for the process runtime: a command on the host with a task's environment, in a session of its own.

Without a tty the command's stdin, stdout and stderr are pipes. With a tty it gets a new pseudo-terminal as its
controlling terminal (so that ^C and SIGWINCH reach its foreground job); stdout carries everything. Either way
it leads a session and process group of its own, and :meth:`ProcessExec.kill` kills its process tree and its
group: nothing it started stays on the node (a process that both leaves the group and is orphaned escapes, as
it escapes the process runtime itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import pty
import struct
import termios
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from pai.nodeagent import process_group
from pai.nodeagent.attempt_record import exit_code_of
from pai.nodeagent.taskexec import STDERR, STDOUT, ExecRequest, command

CHUNK = 65536
QUEUED_CHUNKS = 8  # output read ahead of the reader: a fast writer waits for a slow connection
CTRL_D = b"\x04"
Chunk = tuple[int, bytes] | None


def task_context(pid: int, start_ticks: int | None) -> tuple[dict[str, str], str] | None:
    """The environment a running task's first process was started with, and its working directory; None when
    ``pid`` is not that process (any more)."""
    proc = process_group.PROC / str(pid)
    try:
        environ, cwd = (proc / "environ").read_bytes(), os.readlink(proc / "cwd")
    except OSError:
        return None
    if not process_group.is_running(pid, start_ticks):  # read from a process that reused the pid
        return None
    pairs = (item.partition(b"=") for item in environ.split(b"\0") if item)
    return {k.decode(errors="surrogateescape"): v.decode(errors="surrogateescape") for k, _, v in pairs}, cwd


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _take_terminal() -> None:  # in the child, between fork and exec: a new session whose terminal is stdin
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class ProcessExec:
    """An :class:`~pai.nodeagent.taskexec.ExecSession` of a host process; use :meth:`start`."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int | None) -> None:
        self._proc = proc
        self._master = master  # the pty's master side (tty), else None
        self._out: asyncio.Queue[Chunk] = asyncio.Queue(QUEUED_CHUNKS)
        self._pumps = [asyncio.create_task(p) for p in self._pump_sources()]
        self._ended = asyncio.create_task(self._end_of_output())
        self._eof = False
        self._killed = False

    @classmethod
    async def start(cls, req: ExecRequest, env: Mapping[str, str], cwd: str) -> ProcessExec:
        """Start ``req`` with ``env`` (the task's, then ``req.env``) in ``cwd``; OSError when it cannot start."""
        if not req.tty:
            proc = await asyncio.create_subprocess_exec(
                *command(req), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
            return cls(proc, None)
        master, slave = pty.openpty()
        try:
            _set_size(master, req.rows, req.cols)
            os.set_blocking(master, False)
            proc = await asyncio.create_subprocess_exec(
                *command(req), stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                preexec_fn=_take_terminal)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)  # the child's copies are the only ones: the master reads EOF when they are gone
        return cls(proc, master)

    @property
    def pid(self) -> int:
        return self._proc.pid

    async def write(self, data: bytes) -> None:
        if self._killed or self._eof:
            return
        if self._master is not None:
            await self._write_master(data)
            return
        stdin = self._proc.stdin
        assert stdin is not None
        with contextlib.suppress(ConnectionError, RuntimeError):  # the command closed its stdin, or is gone
            stdin.write(data)
            await stdin.drain()

    async def close_stdin(self) -> None:
        if self._master is not None:
            await self.write(CTRL_D)
        elif self._proc.stdin is not None and not self._eof:
            self._proc.stdin.close()
        self._eof = True

    async def read(self) -> tuple[int, bytes] | None:
        if self._out.empty() and self._ended.done():
            return None
        return await self._out.get()

    async def resize(self, rows: int, cols: int) -> None:
        if self._master is not None and not self._killed:
            _set_size(self._master, rows, cols)

    async def wait(self) -> int:
        return exit_code_of(await self._proc.wait())

    async def kill(self) -> None:
        if not self._killed:
            self._killed = True
            pid = self._proc.pid
            if self._proc.returncode is None:  # else the pid may be another process's by now
                await process_group.kill_tree(pid)
            await process_group.kill_group(pid)  # what left the tree (orphans) but not the group
        for task in (*self._pumps, self._ended):
            task.cancel()
        while not self._out.empty():  # a reader waiting for output gets the end of it
            self._out.get_nowait()
        self._out.put_nowait(None)
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        await self._proc.wait()
        if self._master is not None:
            os.close(self._master)
            self._master = None

    # -- internals -------------------------------------------------------------------------------------

    def _pump_sources(self) -> list[Coroutine[Any, Any, None]]:
        if self._master is not None:
            return [self._pump_master(self._master)]
        assert self._proc.stdout is not None and self._proc.stderr is not None
        return [self._pump_stream(STDOUT, self._proc.stdout), self._pump_stream(STDERR, self._proc.stderr)]

    async def _pump_stream(self, stream: int, reader: asyncio.StreamReader) -> None:
        while chunk := await reader.read(CHUNK):
            await self._out.put((stream, chunk))

    async def _pump_master(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                chunk = os.read(fd, CHUNK)
            except BlockingIOError:
                await _ready(loop.add_reader, loop.remove_reader, fd)
                continue
            except OSError as e:  # EIO: every holder of the terminal's other side has closed it
                if e.errno == errno.EIO:
                    return
                raise
            if not chunk:
                return
            await self._out.put((STDOUT, chunk))

    async def _end_of_output(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._pumps)
        await self._out.put(None)

    async def _write_master(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        view = memoryview(data)
        while view and self._master is not None:
            try:
                view = view[os.write(self._master, view):]
            except BlockingIOError:
                await _ready(loop.add_writer, loop.remove_writer, self._master)
            except OSError:  # EIO: the command is gone
                return


async def _ready(add: Callable[..., None], remove: Callable[[int], object], fd: int) -> None:
    """Until ``fd`` is readable (``loop.add_reader``) or writable (``loop.add_writer``)."""
    ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    add(fd, wake)
    try:
        await ready
    finally:
        remove(fd)
