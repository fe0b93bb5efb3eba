"""What the task of tests/e2e/test_task_ports.py (and bench/proxy.py) runs, with the venv's python on the process
runtime: a web app on its port ``web`` under ``$PAI_PROXY_PREFIX/web`` (a page whose script opens a WebSocket
back through the same path and shows the echo; what a request carried; an upload's size and digest; a large
streamed answer; a WebSocket echo), and a TCP echo on its port ``echo``. Only aiohttp and the standard library: it
is a task, not part of the tests."""

from __future__ import annotations

import asyncio
import hashlib
import os

from aiohttp import WSMsgType, web

HOST = os.environ["PAI_CONTAINER_HOST_IP"]
ROLE, INDEX = os.environ["PAI_CURRENT_TASK_ROLE_NAME"], os.environ["PAI_TASK_INDEX"]
PREFIX = os.environ["PAI_PROXY_PREFIX"] + "/web"

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>task page</title></head>
<body><h1>served by the task</h1><p id="echo">waiting</p>
<script>
const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '%s/ws');
ws.onopen = () => ws.send('hello from the browser');
ws.onmessage = (e) => { document.getElementById('echo').textContent = e.data; };
ws.onerror = () => { document.getElementById('echo').textContent = 'websocket error'; };
</script></body></html>
"""


def port(label: str) -> int:
    return int(os.environ[f"PAI_PORT_LIST_{ROLE}_{INDEX}_{label}"].split(",")[0])


async def page(request: web.Request) -> web.Response:
    return web.Response(text=PAGE % PREFIX, content_type="text/html")


async def seen(request: web.Request) -> web.Response:
    return web.json_response({"path": request.raw_path, "headers": dict(request.headers),
                              "cookies": dict(request.cookies)})


async def upload(request: web.Request) -> web.Response:
    digest, size = hashlib.sha256(), 0
    async for chunk in request.content.iter_chunked(65536):
        digest.update(chunk)
        size += len(chunk)
    return web.json_response({"size": size, "sha": digest.hexdigest()})


async def big(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    resp.content_type = "application/octet-stream"
    await resp.prepare(request)
    block = bytes(range(256)) * 4096  # 1 MiB
    for _ in range(int(request.query.get("mb", "1"))):
        await resp.write(block)
    await resp.write_eof()
    return resp


async def echo_ws(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    async for msg in ws:
        if msg.type is WSMsgType.TEXT:
            await ws.send_str("echo: " + msg.data)
    return ws


async def tcp_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


async def main() -> None:
    app = web.Application(client_max_size=1 << 30)
    app.router.add_get(PREFIX + "/", page)
    app.router.add_get(PREFIX + "/headers", seen)
    app.router.add_post(PREFIX + "/upload", upload)
    app.router.add_get(PREFIX + "/big", big)
    app.router.add_get(PREFIX + "/ws", echo_ws)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, HOST, port("web")).start()
    server = await asyncio.start_server(tcp_echo, HOST, port("echo"))
    print(f"serving {PREFIX}/ on {HOST}:{port('web')}, echo on {port('echo')}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
