"""The client side of the master's tunnel to a task's labelled port (``GET {job}/tasks/{role}/{index}/ports/{label}/
tunnel``, a WebSocket): open one, and pump a local stream pair through it (``pai port-forward``: a local connection;
``pai ssh --proxy``: stdin and stdout).

Frames: BINARY both ways are the bytes; when the local side has no more to send, the TEXT frame ``{"type": "eof"}``
half-closes the task's connection, and what the task still sends comes back until it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys

import click
from aiohttp import ClientError, ClientSession, ClientWebSocketResponse, WSMsgType, WSServerHandshakeError

from pai.cli.errors import ApiError, CliError, UnreachableError
from pai.cli.urls import tunnel_path

__all__ = ["Forwarder", "open_tunnel", "pump", "tunnel_path"]

CHUNK = 64 * 1024
HEARTBEAT_SECONDS = 30.0
EOF_FRAME = json.dumps({"type": "eof"})
_HANDSHAKE = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
              "Sec-WebSocket-Key": "cGFpLXR1bm5lbC1lcnJvcg=="}


async def open_tunnel(session: ClientSession, master: str, token: str | None, path: str) -> ClientWebSocketResponse:
    """The tunnel's WebSocket; ApiError with the master's code and message when it refuses, UnreachableError when
    it does not answer."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        return await session.ws_connect(master + path, headers=headers, heartbeat=HEARTBEAT_SECONDS)
    except WSServerHandshakeError as e:
        raise await _refusal(session, master + path, headers, e) from None
    except (ClientError, OSError) as e:
        raise UnreachableError(master, str(e) or type(e).__name__) from None


async def _refusal(session: ClientSession, url: str, headers: dict[str, str],
                   e: WSServerHandshakeError) -> ApiError:
    """The master's JSON refusal (aiohttp keeps no body of a failed handshake: asked again, as a plain request)."""
    try:
        async with session.get(url, headers={**headers, **_HANDSHAKE}) as resp:
            body = await resp.json(content_type=None)
            return ApiError(resp.status, str(body["code"]), str(body["message"]))
    except (ClientError, ValueError, KeyError, TypeError):
        return ApiError(e.status, f"HTTP {e.status}", e.message)


async def _local_to_tunnel(reader: asyncio.StreamReader, ws: ClientWebSocketResponse) -> None:
    while data := await reader.read(CHUNK):
        await ws.send_bytes(data)
    await ws.send_str(EOF_FRAME)


async def _tunnel_to_local(ws: ClientWebSocketResponse, writer: asyncio.StreamWriter) -> None:
    async for msg in ws:
        if msg.type is WSMsgType.BINARY:
            writer.write(msg.data)
            await writer.drain()
        elif msg.type is WSMsgType.ERROR:
            break


async def pump(ws: ClientWebSocketResponse, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Relay a local stream pair through the tunnel until the tunnel closes (the task's side ended, or the master
    ended it); the local side's EOF half-closes the task's connection. Both are closed when it returns."""
    sending = asyncio.ensure_future(_local_to_tunnel(reader, ws))
    try:
        await _tunnel_to_local(ws, writer)
    finally:
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError, ClientError, ConnectionError):
            await sending
        await ws.close()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


class Forwarder:
    """Accepts local connections and gives each a tunnel of its own."""

    def __init__(self, master: str, token: str | None, path: str) -> None:
        self.master, self.token, self.path = master, token, path
        self.session: ClientSession | None = None

    async def check(self) -> None:
        """One tunnel opened and closed at once, so that a refusal (not running, no such label, may not) is told
        before anything listens."""
        assert self.session is not None
        ws = await open_tunnel(self.session, self.master, self.token, self.path)
        await ws.close()

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.session is not None
        try:
            ws = await open_tunnel(self.session, self.master, self.token, self.path)
        except CliError as e:
            click.echo(f"error: {e.render()}", err=True)
            writer.close()
            return
        await pump(ws, reader, writer)

    def run(self, local: int, what: str) -> None:
        asyncio.run(self.serve(local, what))

    async def serve(self, local: int, what: str) -> None:
        async with ClientSession() as self.session:
            await self.check()
            server = await asyncio.start_server(self.connection, "127.0.0.1", local)
            port = server.sockets[0].getsockname()[1]
            click.echo(f"Forwarding 127.0.0.1:{port} -> {what} (Ctrl-C to stop)")
            sys.stdout.flush()
            async with server:
                await server.serve_forever()
