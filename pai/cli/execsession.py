"""The session of ``pai exec`` (pai.cli.execute): a command in a running task, through the master.

The frames of ``pai.protocol.exec_frames`` over the master's WebSocket (``{JOB}/tasks/{role}/{index}/exec``): the
command's stdout and stderr to ours, our stdin to it with ``-i`` (else it reads an ended stdin), a terminal with ``-t``
(ours in raw mode meanwhile, its size and resizes sent). Exits with the command's exit code; 255 when the session
ended without one (the master closed it: idle, or the connection broke), saying why on stderr.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from contextlib import ExitStack
from typing import BinaryIO

from aiohttp import ClientError, ClientSession, ClientWebSocketResponse, WSMsgType, WSServerHandshakeError

from pai.cli import terminal
from pai.cli.command import Connection
from pai.cli.errors import ApiError, CliError, UnreachableError
from pai.cli.http import quote_segment
from pai.protocol import exec_frames as frames

NO_EXIT_CODE = 255  # as ssh: the session ended without the command's exit code
_READ = 1 << 16


def run_exec(conn: Connection, key: str, role: str, index: int, argv: tuple[str, ...], interactive: bool,
             tty: bool) -> int:
    """The command's exit code, once its session ends."""
    return asyncio.run(_run(conn, key, role, index, argv, interactive, tty))


def _path(key: str, role: str, index: int) -> str:
    return f"/api/v2/jobs/{quote_segment(key)}/tasks/{quote_segment(role)}/{index}/exec"


async def _run(conn: Connection, key: str, role: str, index: int, argv: tuple[str, ...], interactive: bool,
               tty: bool) -> int:
    fd = sys.stdin.fileno()
    local_tty = tty and interactive and terminal.is_terminal(fd)
    rows, cols = terminal.size(fd if local_tty else sys.stdout.fileno())
    query = frames.exec_query(argv, tty, rows, cols)
    http = conn.api.http
    headers = {"Authorization": f"Bearer {http.token}"} if http.token else {}
    async with ClientSession() as session:
        try:
            ws = await session.ws_connect(http.base_url + _path(key, role, index), params=query, headers=headers,
                                          heartbeat=30, max_msg_size=0)
        except WSServerHandshakeError as e:
            raise _refusal(conn, key, role, index, query, e) from None
        except (ClientError, OSError) as e:
            raise UnreachableError(http.base_url, str(e) or type(e).__name__) from None
        async with ws:
            frames_out: asyncio.Queue[bytes | str] = asyncio.Queue()  # one sender keeps their order
            sender = asyncio.create_task(_send(ws, frames_out))
            with ExitStack() as stack:
                loop = asyncio.get_running_loop()
                if local_tty:
                    stack.enter_context(terminal.raw(fd))
                    stack.enter_context(terminal.on_resize(
                        loop, fd, lambda r, c: frames_out.put_nowait(frames.encode_control(frames.Resize(r, c)))))
                if interactive:
                    _pump_stdin(loop, frames_out, fd)
                else:
                    frames_out.put_nowait(frames.encode_control(frames.Eof()))
                try:
                    return await _output(ws)
                finally:
                    sender.cancel()


async def _send(ws: ClientWebSocketResponse, queue: asyncio.Queue[bytes | str]) -> None:
    while True:
        frame = await queue.get()
        if isinstance(frame, bytes):
            await ws.send_bytes(frame)
        else:
            await ws.send_str(frame)


def _refusal(conn: Connection, key: str, role: str, index: int, query: list[tuple[str, str]],
             e: WSServerHandshakeError) -> CliError:
    """Why the master refused the upgrade: asked again without it, it answers the refusal a session would get."""
    try:
        conn.api.http.request("GET", _path(key, role, index), query=dict(query))
    except ApiError as refused:
        if refused.code != "InvalidParametersError" or "WebSocket" not in refused.message:
            return refused
    return ApiError(e.status, f"HTTP {e.status}", f"the master refused the exec: {e.message}")


def _pump_stdin(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes | str], fd: int) -> None:
    """Our stdin to the command, from a thread (a terminal, a pipe or a file alike); at its end, ``eof``."""
    def read() -> None:
        while True:
            try:
                data = os.read(fd, _READ)
            except OSError:
                data = b""
            try:
                loop.call_soon_threadsafe(queue.put_nowait, data or frames.encode_control(frames.Eof()))
            except RuntimeError:  # the loop has ended
                return
            if not data:
                return

    threading.Thread(target=read, name="pai-exec-stdin", daemon=True).start()


async def _output(ws: ClientWebSocketResponse) -> int:
    """The command's output to ours until its exit frame; its exit code (or NO_EXIT_CODE, saying why)."""
    outs: dict[int, BinaryIO] = {frames.STDOUT: sys.stdout.buffer, frames.STDERR: sys.stderr.buffer}
    why = "the connection closed before the command ended"
    async for msg in ws:
        if msg.type is WSMsgType.BINARY:
            stream, data = frames.decode_output(msg.data)
            outs[stream].write(data)
            outs[stream].flush()
        elif msg.type is WSMsgType.TEXT:
            control = frames.decode_control(msg.data)
            if isinstance(control, frames.Exit):
                return control.code
            if isinstance(control, frames.Error):
                why = f"{control.code}: {control.message}"
        else:
            break
    sys.stderr.write(f"\r\nerror: {why}\r\n")
    sys.stderr.flush()
    return NO_EXIT_CODE
