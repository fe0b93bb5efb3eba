"""The proxy's WebSockets: the client's handshake is made with the task first (with the client's headers, Host and
Origin included, and its subprotocols); a refusal there is the client's answer (its status and text), a task that
does not answer a 502; then messages go both ways as they are (text, binary, the close code), until either side
closes."""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import ClientError, ClientWebSocketResponse, ClientWSTimeout, WSMsgType, WSServerHandshakeError, web
from multidict import CIMultiDict
from yarl import URL

from pai.domain.errors import TaskPortUnreachableError
from pai.launcher.taskports import TaskPort
from pai.rest_server.keys import HTTP, SOCKETS

CONNECT_SECONDS = 10.0


def is_websocket(request: web.Request) -> bool:
    connection = {t.strip().lower() for t in request.headers.get("Connection", "").split(",")}
    return request.headers.get("Upgrade", "").lower() == "websocket" and "upgrade" in connection


def _protocols(request: web.Request) -> tuple[str, ...]:
    return tuple(p.strip() for v in request.headers.getall("Sec-WebSocket-Protocol", []) for p in v.split(",")
                 if p.strip())


async def relay_websocket(request: web.Request, url: URL, headers: CIMultiDict[str], target: TaskPort,
                          limit: int) -> web.StreamResponse:
    try:
        upstream = await request.app[HTTP].ws_connect(
            url, headers=headers, protocols=_protocols(request), max_msg_size=limit, autoping=True,
            timeout=ClientWSTimeout(ws_receive=None, ws_close=CONNECT_SECONDS))
    except WSServerHandshakeError as e:  # the task's own refusal (a wrong Origin, no such path): the client's
        return web.Response(status=e.status, text=e.message or "the task refused the WebSocket")
    except (ClientError, OSError, TimeoutError) as e:
        raise TaskPortUnreachableError(f"port {target.label} ({target.address}:{target.port}) of task {target.task} "
                                       f"of job {target.key} did not take the WebSocket: {e}") from None
    ws = web.WebSocketResponse(protocols=(upstream.protocol,) if upstream.protocol else (), max_msg_size=limit)
    try:
        await ws.prepare(request)
        request.app[SOCKETS].add(ws)
        await _relay(ws, upstream)
    finally:
        await upstream.close()
        await ws.close()
    return ws


async def _client_to_task(ws: web.WebSocketResponse, upstream: ClientWebSocketResponse) -> None:
    async for msg in ws:
        if msg.type is WSMsgType.TEXT:
            await upstream.send_str(msg.data)
        elif msg.type is WSMsgType.BINARY:
            await upstream.send_bytes(msg.data)
    await upstream.close(code=ws.close_code or 1000)


async def _task_to_client(ws: web.WebSocketResponse, upstream: ClientWebSocketResponse) -> None:
    async for msg in upstream:
        if msg.type is WSMsgType.TEXT:
            await ws.send_str(msg.data)
        elif msg.type is WSMsgType.BINARY:
            await ws.send_bytes(msg.data)
    await ws.close(code=upstream.close_code or 1000)


async def _relay(ws: web.WebSocketResponse, upstream: ClientWebSocketResponse) -> None:
    tasks = [asyncio.ensure_future(_client_to_task(ws, upstream)), asyncio.ensure_future(_task_to_client(ws, upstream))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
