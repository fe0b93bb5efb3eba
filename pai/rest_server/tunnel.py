"""``GET {job}/tasks/{role}/{index}/ports/{label}/tunnel``: a WebSocket relayed to a TCP connection to the task's
labelled port (``pai port-forward``, ``pai ssh --proxy``).

Frames: BINARY both ways are the connection's bytes; the client may send TEXT ``{"type": "eof"}`` when its side has
no more to send (the master half-closes the connection: the task reads EOF and may still answer). Closing either
side closes the other: the task's connection ends, the WebSocket closes (1000); the WebSocket closes, the connection
is closed. Refusals come before the upgrade, as JSON ``{code, message}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass

from aiohttp import WSMsgType, web

from pai.domain.errors import InvalidParametersError, TaskPortUnreachableError
from pai.rest_server.keys import SERVICE, SOCKETS
from pai.rest_server.service import Service, credentials
from pai.rest_server.sockets import SHUTTING_DOWN
from pai.rest_server.taskports import Tunnel, close_tunnel, open_tunnel, port_address

log = logging.getLogger("pai.tunnel")

CHUNK = 64 * 1024  # read from the task's port at most this much a frame
MAX_FRAME = 1 << 20  # a client's frame may not be larger
CONNECT_SECONDS = 10.0
HEARTBEAT_SECONDS = 30.0  # pings find a client that went away without closing


@dataclass(slots=True)
class Traffic:
    """Bytes relayed each way, and when the last one went (an idle timeout reads it)."""

    to_task: int = 0
    from_task: int = 0
    last: float = 0.0

    def moved(self, n: int, *, to_task: bool) -> None:
        if to_task:
            self.to_task += n
        else:
            self.from_task += n
        self.last = time.monotonic()


async def _from_client(ws: web.WebSocketResponse, writer: asyncio.StreamWriter, traffic: Traffic) -> str:
    half_closed = False
    async for msg in ws:
        if msg.type is WSMsgType.BINARY and not half_closed:
            writer.write(msg.data)
            traffic.moved(len(msg.data), to_task=True)
            await writer.drain()
        elif msg.type is WSMsgType.TEXT and _is_eof(msg.data) and not half_closed and writer.can_write_eof():
            writer.write_eof()  # the task reads EOF; what it still sends comes back
            half_closed = True
        elif msg.type is WSMsgType.ERROR:
            return f"the WebSocket failed: {ws.exception()}"
    return "the client closed the tunnel"


def _is_eof(text: str) -> bool:
    try:
        return bool(json.loads(text).get("type") == "eof")
    except (ValueError, AttributeError):
        return False


async def _from_task(ws: web.WebSocketResponse, reader: asyncio.StreamReader, traffic: Traffic) -> str:
    while data := await reader.read(CHUNK):
        await ws.send_bytes(data)
        traffic.moved(len(data), to_task=False)
    return "the task closed the connection"


async def relay(ws: web.WebSocketResponse, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                traffic: Traffic) -> str:
    """Relay until either side closes; both are closed when it returns why it ended."""
    tasks = [asyncio.ensure_future(_from_client(ws, writer, traffic)),
             asyncio.ensure_future(_from_task(ws, reader, traffic))]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        first = done.pop()
        reason = first.result() if not first.exception() else f"relay failed: {first.exception()}"
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        writer.close()
        await ws.close()
    return reason


_ENDING: set[asyncio.Task[None]] = set()  # ends being recorded (a task is only weakly held by the loop)


async def _record_end(service: Service, opened: Tunnel, started: float, traffic: Traffic, reason: str) -> None:
    """The tunnel's end in the job's history and the log; recorded even when the handler is cancelled (aiohttp
    cancels it once the client's connection is gone)."""
    task = asyncio.ensure_future(_write_end(service, opened, started, traffic, reason))
    _ENDING.add(task)
    task.add_done_callback(_ENDING.discard)
    await asyncio.shield(task)


async def _write_end(service: Service, opened: Tunnel, started: float, traffic: Traffic, reason: str) -> None:
    try:
        await service(None, close_tunnel, opened, time.monotonic() - started, traffic.to_task, traffic.from_task,
                      reason)
    except Exception:  # the job may have been deleted meanwhile; the end is logged either way
        log.exception("could not record the end of a tunnel job=%s", opened.target.key)
    t = opened.target
    log.info("tunnel closed job=%s task=%s label=%s user=%s to_task=%d from_task=%d reason=%s", t.key, t.task, t.label,
             opened.user, traffic.to_task, traffic.from_task, reason)


async def tunnel(request: web.Request) -> web.WebSocketResponse:
    creds = credentials(request)
    at = port_address(request)
    ws = web.WebSocketResponse(max_msg_size=MAX_FRAME, heartbeat=HEARTBEAT_SECONDS)
    if not ws.can_prepare(request).ok:
        raise InvalidParametersError("Upgrade: a tunnel is a WebSocket (connect with Upgrade: websocket)",
                                     field="Upgrade")
    service = request.app[SERVICE]
    opened = await service(creds, open_tunnel, at)
    t, traffic, started = opened.target, Traffic(last=time.monotonic()), time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(t.address, t.port), CONNECT_SECONDS)
    except (OSError, TimeoutError) as e:
        why = str(e) or type(e).__name__
        await _record_end(service, opened, started, traffic, f"the task's port did not answer: {why}")
        raise TaskPortUnreachableError(f"port {t.label} ({t.address}:{t.port}) of task {t.task} of job {t.key} "
                                       f"did not take the connection: {why}") from None
    log.info("tunnel opened job=%s task=%s label=%s node=%s user=%s", t.key, t.task, t.label, t.node, opened.user)
    sockets, reason = request.app[SOCKETS], "the client's connection ended"  # aiohttp cancels the handler then
    try:
        await ws.prepare(request)
        sockets.add(ws)
        reason = await relay(ws, reader, writer, traffic)
        reason = SHUTTING_DOWN if sockets.closing else reason
    finally:
        writer.close()
        await _record_end(service, opened, started, traffic, reason)
    return ws
