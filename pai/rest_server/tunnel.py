"""``GET {job}/tasks/{role}/{index}/ports/{label}/tunnel``: a WebSocket relayed to a TCP connection to the task's
labelled port (``pai port-forward``, ``pai ssh --proxy``), as an interactive session (``pai.rest_server.sessions``:
the job's owner or an admin, the task running, the user's limit of sessions, the idle timeout, a ``tunnel-started``
and a ``tunnel-ended`` event in the job's history).

Frames: BINARY both ways are the connection's bytes; the client may send TEXT ``{"type": "eof"}`` when its side has
no more to send (the master half-closes the connection: the task reads EOF and may still answer). Closing either
side closes the other: the task's connection ends, the WebSocket closes (1000); the WebSocket closes, the connection
is closed. When the platform ends the session (no traffic for the idle timeout, the caller's token revoked) the
WebSocket closes with 1008 and the reason. Refusals come before the upgrade, as JSON ``{code, message}``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import WSCloseCode, WSMsgType, web

from pai.domain.errors import InvalidParametersError, TaskPortUnreachableError
from pai.launcher.interactive import TaskRef
from pai.rest_server.keys import SERVICE, SOCKETS
from pai.rest_server.service import credentials
from pai.rest_server.sessions import check_session, interactive
from pai.rest_server.sockets import SHUTTING_DOWN
from pai.rest_server.taskports import port_address, tunnel_port

CHUNK = 64 * 1024  # read from the task's port at most this much a frame
MAX_FRAME = 1 << 20  # a client's frame may not be larger
CONNECT_SECONDS = 10.0
HEARTBEAT_SECONDS = 30.0  # pings find a client that went away without closing


@dataclass(slots=True)
class Traffic:
    """Bytes relayed each way (each one traffic for the idle timeout), and which side ended the relay."""

    to_task: int = 0
    from_task: int = 0
    ended: str = "the client closed the tunnel"
    touch: Callable[[], None] = lambda: None

    def moved(self, n: int, *, to_task: bool) -> None:
        if to_task:
            self.to_task += n
        else:
            self.from_task += n
        self.touch()


async def _from_client(ws: web.WebSocketResponse, writer: asyncio.StreamWriter, traffic: Traffic) -> None:
    try:
        await _client_frames(ws, writer, traffic)
    except OSError as e:  # ConnectionError among them: the task's side broke
        traffic.ended = f"the connection to the task broke: {e}"


async def _client_frames(ws: web.WebSocketResponse, writer: asyncio.StreamWriter, traffic: Traffic) -> None:
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
            traffic.ended = f"the WebSocket failed: {ws.exception()}"
            return
    traffic.ended = "the client closed the tunnel"


def _is_eof(text: str) -> bool:
    try:
        return bool(json.loads(text).get("type") == "eof")
    except (ValueError, AttributeError):
        return False


async def _from_task(ws: web.WebSocketResponse, reader: asyncio.StreamReader, traffic: Traffic) -> None:
    try:
        while data := await reader.read(CHUNK):
            await ws.send_bytes(data)
            traffic.moved(len(data), to_task=False)
    except OSError as e:  # the task's connection reset, or the client's gone mid-send
        traffic.ended = f"the relay broke: {e}"
        return
    traffic.ended = "the task closed the connection"


async def tunnel(request: web.Request) -> web.WebSocketResponse:
    creds, at = credentials(request), port_address(request)
    ref = TaskRef(at.key, at.role, at.index)
    target = await request.app[SERVICE](creds, tunnel_port, at)  # 403, 404 (naming the labels), 409: nothing opened
    ws = web.WebSocketResponse(max_msg_size=MAX_FRAME, heartbeat=HEARTBEAT_SECONDS)
    if not ws.can_prepare(request).ok:
        await check_session(request, ref, kind="tunnel")  # 429 when the user has no room for one
        raise InvalidParametersError("Upgrade: a tunnel is a WebSocket (connect with Upgrade: websocket)",
                                     field="Upgrade")
    sockets, traffic = request.app[SOCKETS], Traffic()
    async with interactive(request, ref, kind="tunnel", detail=f"port {at.label} ({target.port})") as session:
        traffic.touch = session.touch
        port = session.task.ports.get(at.label, (target.port,))[0]
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(session.task.address, port),
                                                    CONNECT_SECONDS)
        except (OSError, TimeoutError) as e:
            why = str(e) or type(e).__name__
            session.reason = f"the task's port did not answer: {why}"
            raise TaskPortUnreachableError(f"port {at.label} ({session.task.address}:{port}) of task {ref.name} of "
                                           f"job {ref.key} did not take the connection: {why}") from None
        reason = "the client's connection ended"  # unless the relay ends first: aiohttp cancels the handler then
        try:
            await ws.prepare(request)
            sockets.add(ws)
            ended = await session.until_ended(_from_client(ws, writer, traffic), _from_task(ws, reader, traffic))
            if ended is not None:  # the platform's: idle, or the caller may no longer
                await ws.close(code=WSCloseCode.POLICY_VIOLATION, message=ended[1][:120].encode())
            reason = ended[1] if ended is not None else traffic.ended
        finally:
            writer.close()
            await ws.close()
            reason = SHUTTING_DOWN if sockets.closing else reason
            session.reason = f"{reason} ({traffic.to_task} bytes to the task, {traffic.from_task} from it)"
    return ws
