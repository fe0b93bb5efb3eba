"""The stdlib WebSocket client of ssh's ProxyCommand (``pai.cli.wsclient``, blocking: run on a thread here) against
aiohttp's server: the handshake
with the caller's headers, frames both ways (small, 16-bit and 64-bit lengths), pings answered, the server's close
code and reason, a refusal's ``{code, message}``; and the ProxyCommand imports neither aiohttp, click nor asyncio."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

from pai.cli import wsclient
from pai.cli.errors import ApiError, UnreachableError

Server = Callable[[web.Application], Awaitable[TestServer]]


async def echo(request: web.Request) -> web.StreamResponse:
    if request.headers.get("Authorization") != "Bearer t":
        return web.json_response({"code": "UnauthorizedUserError", "message": "who are you"}, status=401)
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    await ws.ping(b"are you there")
    async for msg in ws:
        if msg.type is WSMsgType.BINARY:
            await ws.send_bytes(msg.data[::-1])
        elif msg.type is WSMsgType.TEXT and msg.data == "bye":
            await ws.close(code=1008, message=b"idle for too long")
    return ws


@pytest.fixture
async def url(aiohttp_server: Server) -> str:
    app = web.Application()
    app.router.add_get("/ws", echo)
    server = await aiohttp_server(app)
    return str(server.make_url("/ws"))


async def test_frames_of_every_length_go_both_ways_and_the_servers_close_is_read(url: str) -> None:
    ws = await asyncio.to_thread(wsclient.connect, url, {"Authorization": "Bearer t"})
    for size in (0, 5, 125, 126, 65535, 65536, 300_000):
        data = bytes(i % 251 for i in range(size))
        await asyncio.to_thread(ws.send, wsclient.BINARY, data)
        assert await asyncio.to_thread(ws.receive) == (wsclient.BINARY, data[::-1])  # its ping answered on the way
    await asyncio.to_thread(ws.send, wsclient.TEXT, b"bye")
    assert await asyncio.to_thread(ws.receive) is None
    assert (ws.close_code, ws.close_reason) == (1008, "idle for too long")


async def test_a_refusal_is_the_masters_code_and_message(url: str) -> None:
    with pytest.raises(ApiError) as e:
        await asyncio.to_thread(wsclient.connect, url, {})
    assert (e.value.status, e.value.code, e.value.message) == (401, "UnauthorizedUserError", "who are you")


async def test_nobody_listening_is_unreachable(unused_tcp_port: int) -> None:
    with pytest.raises(UnreachableError):
        await asyncio.to_thread(wsclient.connect, f"http://127.0.0.1:{unused_tcp_port}/ws", {})


def test_the_proxy_command_imports_the_standard_library_and_pai_cli_light_modules_only() -> None:
    code = ("import sys, json, pai.cli.sshproxy; print(json.dumps(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('aiohttp', 'click', 'yarl', 'asyncio'))))")
    loaded: Any = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                            text=True).stdout)
    assert loaded == []
