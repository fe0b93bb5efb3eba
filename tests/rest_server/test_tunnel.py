"""``GET {job}/tasks/{role}/{index}/ports/{label}/tunnel``: a WebSocket relayed to a TCP connection to the running
task's port (served here by an echo server on the node's address), for the job's owner and admins only, as an
interactive session: two events of the job's history, the user's limit of sessions, the idle timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestClient

from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig
from tests.eventually import eventually
from tests.rest_server.conftest import ADMIN_PASSWORD, AGENT_TOKEN, Api
from tests.rest_server.taskport_kit import NODE_ADDRESS, add_node, events, exit_task, placed, running, user
from tests.rest_server.test_tenancy import private

TUNNEL = "/api/v2/jobs/admin~t/tasks/w/0/ports/{label}/tunnel"
UPGRADE = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


async def refused(api: Api, path: str, token: str | None = None) -> tuple[int, dict[str, str]]:
    """The answer to a WebSocket handshake that is refused (JSON, before the upgrade)."""
    headers = {**UPGRADE, **({"Authorization": f"Bearer {token}"} if token else api.headers())}
    if token == "":
        del headers["Authorization"]
    resp = await api.client.get(path, headers=headers)
    return resp.status, await resp.json()


class Echo:
    """A TCP server that sends back what it reads, then closes when it reads EOF; it keeps what it saw."""

    def __init__(self) -> None:
        self.received = b""
        self.eof = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def serve(self, port: int) -> None:
        self.server = await asyncio.start_server(self._client, NODE_ADDRESS, port)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            self.received += data
            writer.write(data)
            await writer.drain()
        self.eof.set()
        writer.write(b"bye")
        writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def echo(api: Api) -> AsyncIterator[tuple[Api, Echo, dict[str, int]]]:
    await add_node(api)
    ports = await running(api, "t", ("echo", "web"))
    server = Echo()
    await server.serve(ports["echo"])
    yield api, server, ports
    server.close()


async def test_bytes_go_both_ways_and_eof_half_closes(echo: tuple[Api, Echo, dict[str, int]]) -> None:
    api, server, ports = echo
    async with api.client.ws_connect(TUNNEL.format(label="echo"), headers=api.headers()) as ws:
        big = bytes(range(256)) * 1024  # 256 KiB: several frames back
        await ws.send_bytes(b"hello ")
        await ws.send_bytes(big)
        got = b""
        while len(got) < 6 + len(big):
            msg = await ws.receive(timeout=10)
            assert msg.type is WSMsgType.BINARY, msg
            got += msg.data
        assert got == b"hello " + big
        await ws.send_str('{"type": "eof"}')  # the task reads EOF, answers, closes: the tunnel closes
        msg = await ws.receive(timeout=10)
        assert (msg.type, msg.data) == (WSMsgType.BINARY, b"bye")
        msg = await ws.receive(timeout=10)
        assert msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSED)
    assert server.eof.is_set() and server.received == b"hello " + big

    closed = await eventually(lambda: events(api, "admin~t", "tunnel-ended"), what="the tunnel-ended event")
    opened = await events(api, "admin~t", "tunnel-started")
    assert len(opened) == 1 and opened[0]["details"]["user"] == "admin"
    assert opened[0]["details"]["detail"] == f"port echo ({ports['echo']})"
    sent = 6 + len(big)
    assert closed[0]["details"]["reason"] == f"the task closed the connection ({sent} bytes to the task, {sent + 3} " \
        "from it)"


async def test_closing_the_websocket_closes_the_task_s_connection(echo: tuple[Api, Echo, dict[str, int]]) -> None:
    api, server, _ = echo
    ws = await api.client.ws_connect(TUNNEL.format(label="echo"), headers=api.headers())
    await ws.send_bytes(b"ping")
    assert (await ws.receive(timeout=10)).data == b"ping"
    await ws.close()
    await asyncio.wait_for(server.eof.wait(), 10)
    closed = await eventually(lambda: events(api, "admin~t", "tunnel-ended"), what="the tunnel-ended event")
    assert closed[0]["details"]["reason"].startswith(("the client closed the tunnel", "the client's connection ended"))


async def test_who_may_open_one(echo: tuple[Api, Echo, dict[str, int]]) -> None:
    api, _, _ = echo
    bob = await user(api, "bob")
    status, answer = await refused(api, TUNNEL.format(label="echo"), bob)  # bob reads the job, owns none
    assert (status, answer["code"]) == (403, "ForbiddenUserError")
    assert "may not open tunnel sessions in jobs of user admin" in answer["message"]
    await private(api)
    status, answer = await refused(api, TUNNEL.format(label="echo"), bob)
    assert (status, answer["code"]) == (403, "ForbiddenUserError") and "read" in answer["message"]
    status, answer = await refused(api, TUNNEL.format(label="echo"), "")
    assert (status, answer["code"]) == (401, "UnauthorizedUserError")
    assert await events(api, "admin~t", "tunnel-started") == []


async def test_refusals_name_what_is_wrong(echo: tuple[Api, Echo, dict[str, int]]) -> None:
    api, _, ports = echo
    status, answer = await refused(api, TUNNEL.format(label="tensorboard"))
    assert (status, answer["code"]) == (404, "NoTaskPortError")
    assert "no port labelled 'tensorboard'" in answer["message"] and "echo, web" in answer["message"]
    status, answer = await refused(api, TUNNEL.format(label="web"))  # nothing listens there
    assert (status, answer["code"]) == (502, "TaskPortUnreachableError") and str(ports["web"]) in answer["message"]
    status, answer = await refused(api, "/api/v2/jobs/admin~t/tasks/x/0/ports/echo/tunnel")
    assert (status, answer["code"]) == (404, "NoTaskRoleError") and "its roles: w" in answer["message"]
    status, answer = await refused(api, "/api/v2/jobs/admin~t/tasks/w/1/ports/echo/tunnel")
    assert (status, answer["code"]) == (404, "NoTaskRoleError") and "no index 1" in answer["message"]
    status, answer = await refused(api, "/api/v2/jobs/admin~t/tasks/w/first/ports/echo/tunnel")
    assert (status, answer["code"]) == (400, "InvalidParametersError")
    status, answer = await refused(api, "/api/v2/jobs/admin~nope/tasks/w/0/ports/echo/tunnel")
    assert (status, answer["code"]) == (404, "NoJobError")
    status, answer = await api.call("GET", TUNNEL.format(label="echo"))  # no Upgrade
    assert (status, answer["code"]) == (400, "InvalidParametersError") and "WebSocket" in answer["message"]
    assert len(await events(api, "admin~t", "tunnel-started")) == 1  # the 502's, and no other
    failed = await events(api, "admin~t", "tunnel-ended")
    assert len(failed) == 1 and "the task's port did not answer" in failed[0]["details"]["reason"]


async def test_a_task_that_is_not_running_is_a_409(api: Api) -> None:
    await add_node(api)
    await placed(api, "t", ("echo",))  # placed, not started yet
    status, answer = await refused(api, TUNNEL.format(label="echo"))
    assert (status, answer["code"]) == (409, "TaskNotRunningError")
    assert answer["message"] == "task w[0] of job admin~t is not running (state WAITING)"
    await running(api, "u", ("echo",))
    await exit_task(api, "u")
    status, answer = await refused(api, TUNNEL.format(label="echo").replace("~t", "~u"))
    assert (status, answer["code"]) == (409, "TaskNotRunningError") and "(state SUCCEEDED)" in answer["message"]


async def test_a_master_that_shuts_down_closes_its_tunnels(echo: tuple[Api, Echo, dict[str, int]]) -> None:
    api, server, _ = echo
    ws = await api.client.ws_connect(TUNNEL.format(label="echo"), headers=api.headers())
    await ws.send_bytes(b"ping")
    assert (await ws.receive(timeout=10)).data == b"ping"
    await api.client.app.shutdown()  # what aiohttp runs first when the process stops
    msg = await ws.receive(timeout=10)
    assert (msg.type, ws.close_code) == (WSMsgType.CLOSE, 1001) and "shutting down" in msg.extra
    await asyncio.wait_for(server.eof.wait(), 10)
    closed = await eventually(lambda: events(api, "admin~t", "tunnel-ended"), what="the tunnel-ended event")
    assert closed[0]["details"]["reason"].startswith("the master is shutting down (4 bytes to the task, 4 from it)")


@pytest.fixture
async def limited(db_url: str, tmp_path: Path, aiohttp_client: Callable[[web.Application], Awaitable[
        TestClient[Any, Any]]]) -> AsyncIterator[tuple[Api, Echo]]:
    """A master whose users have one interactive session each, closed after 1 s without traffic."""
    config = MasterConfig(data_dir=tmp_path / "data", database_url=db_url, admin_password=ADMIN_PASSWORD,
                          agent_token=AGENT_TOKEN, tick_seconds=0.05, max_sessions_per_user=1, idle_timeout_seconds=1)
    api = Api(await aiohttp_client(make_app(config)))
    await api.login()
    await add_node(api)
    ports = await running(api, "t", ("echo",))
    server = Echo()
    await server.serve(ports["echo"])
    yield api, server
    server.close()


async def test_a_user_s_limit_and_the_idle_timeout(limited: tuple[Api, Echo]) -> None:
    api, server = limited
    ws = await api.client.ws_connect(TUNNEL.format(label="echo"), headers=api.headers())
    await ws.send_bytes(b"ping")
    assert (await ws.receive(timeout=10)).data == b"ping"
    status, answer = await refused(api, TUNNEL.format(label="echo"))
    assert (status, answer["code"]) == (429, "TooManySessionsError")
    msg = await ws.receive(timeout=10)  # nothing more either way: the session ends
    assert (msg.type, ws.close_code) == (WSMsgType.CLOSE, 1008) and "no traffic" in msg.extra
    await asyncio.wait_for(server.eof.wait(), 10)
    ended = await eventually(lambda: events(api, "admin~t", "tunnel-ended"), what="the tunnel-ended event")
    assert ended[0]["details"]["reason"].startswith("no traffic either way for 1 s")
    async with api.client.ws_connect(TUNNEL.format(label="echo"), headers=api.headers()) as again:  # room again
        await again.send_bytes(b"pong")
        assert (await again.receive(timeout=10)).data == b"pong"
