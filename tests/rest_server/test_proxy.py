"""``/proxy/{user}~{job}/{role}/{index}/{label}/...``: the master's reverse proxy to a running task's labelled port,
against an app the test serves on the task's port at the node's address: the path unchanged, the prefix and
forwarding headers, pai's credentials stripped (the Authorization header, the ``pai_proxy`` cookie), bodies streamed
both ways, WebSockets, the cookie session, who may, and the refusals."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestClient
from yarl import URL

from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig
from tests.rest_server.conftest import ADMIN_PASSWORD, AGENT_TOKEN, Api
from tests.rest_server.taskport_kit import NODE_ADDRESS, add_node, exit_task, running, user
from tests.rest_server.test_tenancy import private

LIMIT = 1 << 20  # the proxy's body limit in these tests
PREFIX = "/proxy/admin~p/w/0/web"


class TaskApp:
    """What a task serves on its port: it answers what it was sent (method, path, headers, the body's size and
    digest), streams a large answer only as fast as the test takes it, answers gzip, and echoes a WebSocket."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.runner: web.AppRunner | None = None

    async def serve(self, port: int) -> None:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_get(PREFIX + "/ws", self.ws)
        app.router.add_get(PREFIX + "/stream", self.stream)
        app.router.add_get(PREFIX + "/gzip", self.gzipped)
        app.router.add_get(PREFIX + "/empty/{status:\\d+}", self.empty)
        app.router.add_route("*", PREFIX + "/{tail:.*}", self.echo)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, NODE_ADDRESS, port).start()

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def echo(self, request: web.Request) -> web.Response:
        body = await request.read()
        seen = {"method": request.method, "path": request.raw_path, "headers": dict(request.headers),
                "cookies": dict(request.cookies), "size": len(body), "sha": hashlib.sha256(body).hexdigest()}
        resp = web.json_response(seen, status=201 if request.method == "POST" else 200)
        resp.set_cookie("app_session", "s1", path=PREFIX + "/")
        return resp

    async def stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.content_type = "application/octet-stream"
        await resp.prepare(request)
        await resp.write(b"first" + b"." * 65531)
        await asyncio.wait_for(self.release.wait(), 10)  # the rest only once the test has read the first part
        for _ in range(64):
            await resp.write(b"x" * 65536)
        await resp.write_eof()
        return resp

    async def gzipped(self, request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(b"compressed " * 100), headers={"Content-Encoding": "gzip"})

    async def empty(self, request: web.Request) -> web.Response:
        status = int(request.match_info["status"])
        return web.Response(status=status, headers={"ETag": '"v1"', "Location": PREFIX + "/elsewhere"})

    async def ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("echo.v1",))
        await ws.prepare(request)
        await ws.send_str(json.dumps({"origin": request.headers.get("Origin"), "host": request.host,
                                      "cookies": dict(request.cookies)}))
        async for msg in ws:
            if msg.type is WSMsgType.TEXT:
                await ws.send_str("echo: " + msg.data)
            elif msg.type is WSMsgType.BINARY:
                await ws.send_bytes(msg.data[::-1])
        return ws


@pytest.fixture
async def proxied(db_url: str, tmp_path: Path, aiohttp_client: Callable[[web.Application], Awaitable[
        TestClient[Any, Any]]]) -> AsyncIterator[tuple[Api, TaskApp]]:
    config = MasterConfig(data_dir=tmp_path / "data", database_url=db_url, admin_password=ADMIN_PASSWORD,
                          agent_token=AGENT_TOKEN, tick_seconds=0.05, proxy_max_body_bytes=LIMIT)
    api = Api(await aiohttp_client(make_app(config)))
    await api.login()
    await add_node(api)
    ports = await running(api, "p", ("web", "other"))
    task = TaskApp()
    await task.serve(ports["web"])
    yield api, task
    task.release.set()
    await task.close()


async def test_a_get_reaches_the_task_as_sent_with_the_forwarding_headers(proxied: tuple[Api, TaskApp]) -> None:
    api, _ = proxied
    headers = api.headers({"Cookie": "theirs=1; pai_proxy=whatever; other=2", "X-Forwarded-For": "10.1.1.1",
                           "Connection": "keep-alive, X-Hop", "X-Hop": "dropped", "X-Kept": "kept"})
    resp = await api.client.get(URL(PREFIX + "/a%20b/c?x=1&y=%2F", encoded=True), headers=headers)
    assert resp.status == 200, await resp.text()
    seen = await resp.json()
    assert seen["path"] == PREFIX + "/a%20b/c?x=1&y=%2F"  # unchanged, its encoding too
    got = {k.lower(): v for k, v in seen["headers"].items()}
    host = f"{api.client.host}:{api.client.port}"
    assert got["host"] == host and got["x-forwarded-host"] == host
    assert got["x-forwarded-prefix"] == PREFIX and got["x-forwarded-proto"] == "http"
    assert got["x-forwarded-for"] == "10.1.1.1, 127.0.0.1"
    assert "authorization" not in got and "x-hop" not in got and got["x-kept"] == "kept"
    assert seen["cookies"] == {"theirs": "1", "other": "2"}  # pai's cookie stripped, the app's own kept
    assert resp.headers.getall("Set-Cookie")[0].startswith("app_session=s1")  # the app's cookies come back


async def test_a_post_body_streams_to_the_task(proxied: tuple[Api, TaskApp]) -> None:
    api, _ = proxied
    data = bytes(range(256)) * 3000  # 750 KiB, under the limit

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked
        for i in range(0, len(data), 100_000):
            yield data[i:i + 100_000]

    for body in (data, chunks()):
        resp = await api.client.post(PREFIX + "/upload", data=body, headers=api.headers())
        seen = await resp.json()
        assert resp.status == 201 and seen["method"] == "POST"
        assert (seen["size"], seen["sha"]) == (len(data), hashlib.sha256(data).hexdigest())
    resp = await api.client.request("PATCH", PREFIX + "/x", data=b"p", headers=api.headers())
    assert (await resp.json())["method"] == "PATCH"


async def test_a_large_answer_streams_without_being_buffered(proxied: tuple[Api, TaskApp]) -> None:
    api, task = proxied
    resp = await api.client.get(PREFIX + "/stream", headers=api.headers())
    assert resp.status == 200
    first = await asyncio.wait_for(resp.content.readexactly(65536), 10)  # before the task has sent the rest
    assert first.startswith(b"first")
    task.release.set()
    rest = await resp.content.read()
    assert len(rest) == 64 * 65536


async def test_an_encoded_answer_comes_back_as_the_task_sent_it(proxied: tuple[Api, TaskApp]) -> None:
    api, _ = proxied
    resp = await api.client.get(PREFIX + "/gzip", headers=api.headers(), auto_decompress=False)
    assert resp.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(await resp.read()) == b"compressed " * 100


@pytest.mark.parametrize("status", [204, 302, 304])
async def test_answers_without_a_body_and_redirects_come_back_as_they_are(proxied: tuple[Api, TaskApp],
                                                                         status: int) -> None:
    api, _ = proxied
    resp = await api.client.get(f"{PREFIX}/empty/{status}", headers=api.headers(), allow_redirects=False)
    assert resp.status == status and resp.headers["ETag"] == '"v1"' and await resp.read() == b""
    assert resp.headers["Location"] == PREFIX + "/elsewhere"  # a redirect is the client's to follow


async def test_head_and_options(proxied: tuple[Api, TaskApp]) -> None:
    api, _ = proxied
    resp = await api.client.head(PREFIX + "/page", headers=api.headers())
    assert resp.status == 200 and int(resp.headers["Content-Length"]) > 0 and await resp.read() == b""
    resp = await api.client.options(PREFIX + "/page", headers=api.headers())
    assert resp.status == 200 and (await resp.json())["method"] == "OPTIONS"


async def test_a_websocket_through_the_proxy(proxied: tuple[Api, TaskApp]) -> None:
    api, _ = proxied
    async with api.client.ws_connect(PREFIX + "/ws", headers=api.headers({"Origin": "http://example.org"}),
                                     protocols=("echo.v1",)) as ws:
        assert ws.protocol == "echo.v1"
        hello = json.loads((await ws.receive(timeout=10)).data)
        assert hello["origin"] == "http://example.org" and hello["host"] == f"{api.client.host}:{api.client.port}"
        await ws.send_str("hi")
        assert (await ws.receive(timeout=10)).data == "echo: hi"
        await ws.send_bytes(b"abc")
        assert (await ws.receive(timeout=10)).data == b"cba"


async def test_a_browser_s_cookie_session(proxied: tuple[Api, TaskApp]) -> None:
    api, _ = proxied
    resp = await api.client.post("/api/v2/proxy/session", headers=api.headers())
    assert resp.status == 200 and (await resp.json())["user"] == "admin"
    cookie = resp.cookies["pai_proxy"]
    assert cookie["httponly"] and cookie["path"] == "/proxy/" and cookie["samesite"] == "Lax"
    assert api.token not in cookie.value  # sealed, not the token
    jar = {"Cookie": f"pai_proxy={cookie.value}; theirs=1"}
    api.client.session.cookie_jar.clear()  # the browser here is these headers
    resp = await api.client.get(PREFIX + "/page", headers=jar)
    assert resp.status == 200 and (await resp.json())["cookies"] == {"theirs": "1"}
    async with api.client.ws_connect(PREFIX + "/ws", headers=jar) as ws:
        cookies = json.loads((await ws.receive(timeout=10)).data)["cookies"]
        assert cookies["theirs"] == "1" and "pai_proxy" not in cookies
    resp = await api.client.get(PREFIX + "/page", headers={**jar, "Authorization": "Basic YXBwOnVzZXI="})
    assert resp.status == 200  # the app's own Basic credentials (not relayed either): the cookie decides
    resp = await api.client.get(PREFIX + "/page", headers={"Cookie": "pai_proxy=forged"})
    assert (resp.status, (await resp.json())["code"]) == (401, "UnauthorizedUserError")
    resp = await api.client.delete("/api/v2/proxy/session")
    assert resp.status == 200 and resp.cookies["pai_proxy"]["max-age"] == "0"
    status, _ = await api.call("DELETE", "/api/v2/authn/basic/logout")  # the token ends: so does its cookie
    assert status == 200
    resp = await api.client.get(PREFIX + "/page", headers=jar)
    assert resp.status == 401


async def test_who_may_use_it(proxied: tuple[Api, TaskApp]) -> None:
    api, _ = proxied
    bob = await user(api, "bob")
    resp = await api.client.get(PREFIX + "/page", headers={"Authorization": f"Bearer {bob}"})
    assert resp.status == 200  # a reader of the job
    await private(api)
    resp = await api.client.get(PREFIX + "/page", headers={"Authorization": f"Bearer {bob}"})
    assert (resp.status, (await resp.json())["code"]) == (403, "ForbiddenUserError")
    resp = await api.client.get(PREFIX + "/page", headers={"Accept": "text/html"})
    answer = await resp.json()
    assert (resp.status, answer["code"]) == (401, "UnauthorizedUserError") and "/api/v2/proxy/session" in \
        answer["message"]


async def test_refusals(proxied: tuple[Api, TaskApp]) -> None:
    api, _ = proxied

    async def answer(method: str, path: str, **kw: Any) -> tuple[int, str, str]:
        resp = await api.client.request(method, path, headers=api.headers(kw.pop("headers", None)), **kw)
        body = await resp.json()
        return resp.status, body["code"], body["message"]

    status, code, message = await answer("POST", PREFIX + "/upload", data=b"x" * (LIMIT + 1))
    assert (status, code) == (413, "RequestTooLargeError") and str(LIMIT) in message

    async def too_much() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"y" * 100_000

    status, code, message = await answer("POST", PREFIX + "/upload", data=too_much())
    assert (status, code) == (413, "RequestTooLargeError") and "--proxy-max-body-mb" in message
    status, code, message = await answer("GET", "/proxy/admin~p/w/0/nope/")
    assert (status, code) == (404, "NoTaskPortError") and "its labels: http, ssh, web, other" in message
    status, code, message = await answer("GET", "/proxy/admin~p/w/0/other/")  # nothing listens there
    assert (status, code) == (502, "TaskPortUnreachableError")
    status, code, message = await answer("GET", "/proxy/admin~nope/w/0/web/")
    assert (status, code) == (404, "NoJobError")
    await exit_task(api, "p")
    status, code, message = await answer("GET", PREFIX + "/page")
    assert (status, code) == (409, "TaskNotRunningError") and "(state SUCCEEDED)" in message
