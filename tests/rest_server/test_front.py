"""The read front (pai.rest_server.front) in front of a real master on its Unix socket: what it answers itself,
what it hands to the master with its connection (pai.rest_server.handoff) or passes through as it came, and what
it forgets after a write."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig
from pai.rest_server.front import make_front_app
from pai.rest_server.handoff import MAX_HANDOFF_BYTES, MasterLink
from pai.rest_server.keys import LAUNCHER
from pai.rest_server.metrics import merged_metrics
from pai.rest_server.serve import master_socket_path
from tests.rest_server.conftest import ADMIN_PASSWORD, AGENT_TOKEN, Api

JOB = {"name": "j1", "type": "job", "protocolVersion": 2,
       "prerequisites": [{"type": "dockerimage", "name": "img", "uri": "busybox"}],
       "taskRoles": {"main": {"instances": 1, "dockerImage": "img", "commands": ["sleep 1"],
                              "resourcePerInstance": {"cpu": 1, "memoryMB": 128, "gpu": 0}}}}


@dataclass
class Fronted:
    api: Api  # speaks to the front
    master_socket: str
    master: web.AppRunner
    link: MasterLink | None  # None: the master takes no connection over (every request passes through)

    async def stop_master(self) -> None:
        await self.master.cleanup()

    async def direct_call(self, raw: bytes) -> bytes:
        """``raw`` (one HTTP/1.1 request) sent to the master itself, on its Unix socket; its answer's first bytes."""
        reader, writer = await asyncio.open_unix_connection(self.master_socket)
        try:
            writer.write(raw)
            return await asyncio.wait_for(reader.read(4096), 10)
        finally:
            writer.close()

    async def direct(self, path: str, headers: dict[str, str]) -> Any:
        """A request to the master itself, on its Unix socket."""
        connector = aiohttp.UnixConnector(path=self.master_socket)
        async with aiohttp.ClientSession(connector=connector) as http, http.get("http://master" + path,
                                                                                 headers=headers) as resp:
            return await resp.json()


@pytest.fixture
async def fronted(db_url: str, tmp_path: Path, request: pytest.FixtureRequest,
                  aiohttp_client: Callable[[web.Application], Awaitable[TestClient[Any, Any]]]
                  ) -> AsyncIterator[Fronted]:
    """The master and its front; with the handoff link unless the test asks ``fronted`` for False."""
    config = MasterConfig(data_dir=tmp_path / "data", database_url=db_url, admin_password=ADMIN_PASSWORD,
                          agent_token=AGENT_TOKEN, tick_seconds=0.05, list_processes=0)
    path = master_socket_path(config.data_dir)
    config.data_dir.mkdir(parents=True)
    runner = web.AppRunner(make_app(replace(config, front=True)))
    await runner.setup()
    await web.UnixSite(runner, path).start()
    link = MasterLink(path) if getattr(request, "param", True) else None
    if link is not None:
        await link.start(runner)
    api = Api(await aiohttp_client(make_front_app(config, path)))
    await api.login()
    yield Fronted(api, path, runner, link)
    if link is not None:
        link.close()
    await runner.cleanup()


async def test_submission_passes_through_and_the_front_reads_it(fronted: Fronted) -> None:
    api = fronted.api
    status, body = await api.call("POST", "/api/v2/jobs", body=json.dumps(JOB), content_type="application/json")
    assert status == 202, body
    status, detail = await api.call("GET", "/api/v2/jobs/admin~j1")
    assert (status, detail["name"], detail["jobStatus"]["username"]) == (200, "j1", "admin")
    status, page = await api.call("GET", "/api/v2/jobs?withTotalCount=true")
    assert (status, page["totalCount"], [j["name"] for j in page["data"]]) == (200, 1, ["j1"])


async def test_reads_are_answered_by_the_front_while_the_master_is_gone(fronted: Fronted) -> None:
    api = fronted.api
    assert (await api.call("POST", "/api/v2/jobs", body=json.dumps(JOB), content_type="application/json"))[0] == 202
    await api.call("GET", "/api/v2/jobs")  # the token is now known to the front
    await fronted.stop_master()
    status, jobs = await api.call("GET", "/api/v2/jobs")
    assert (status, [j["name"] for j in jobs]) == (200, ["j1"])
    status, config = await api.call("GET", "/api/v2/jobs/admin~j1/config")  # YAML, as submitted
    assert (status, yaml.safe_load(config)["name"]) == (200, "j1")
    status, error = await api.call("GET", "/api/v2/virtual-clusters")  # the master's: it is not there
    assert status == 503 and error["code"] == "UnknownError" and "the master is not answering" in error["message"]


async def test_the_masters_errors_and_request_id_come_back_as_they_were(fronted: Fronted) -> None:
    resp = await fronted.api.client.post("/api/v2/jobs", data=b"{\"jobName\": 3}", headers=fronted.api.headers(
        {"Content-Type": "application/json"}))
    body = await resp.json()
    assert resp.status == 400 and body["code"] == "InvalidProtocolError"
    request_id = resp.headers["X-Request-Id"]
    assert len(resp.headers.getall("X-Request-Id")) == 1
    # the id is the master's: a 404 of the front's own would carry another
    status, jobs = await fronted.api.call("GET", "/api/v2/jobs")
    assert (status, jobs) == (200, [])
    assert request_id != (await fronted.api.client.get("/api/v2/jobs", headers=fronted.api.headers())).headers[
        "X-Request-Id"]


async def test_a_revoke_through_the_front_is_refused_on_the_next_read(fronted: Fronted) -> None:
    api = fronted.api
    token = await api.login()
    assert (await api.call("GET", "/api/v2/jobs", token=token))[0] == 200  # cached by the front
    status, _ = await api.call("DELETE", f"/api/v2/tokens/{token}", token=token)
    assert status == 200
    status, body = await api.call("GET", "/api/v2/jobs", token=token)
    assert (status, body["code"]) == (401, "UnauthorizedUserError")


@pytest.mark.parametrize("fronted", [pytest.param(True, id="handed-over"), pytest.param(False, id="passed-through")],
                         indirect=True)
async def test_the_agent_channel_reaches_the_master_both_ways(fronted: Fronted) -> None:
    client = fronted.api.client
    async with client.ws_connect("/api/internal/agents/n1/channel",
                                 headers={"Authorization": f"Bearer {AGENT_TOKEN}"}) as ws:
        message = await ws.receive_json(timeout=5)
        assert message["reason"] == "connected"
    resp = await client.get("/api/internal/agents/n1/channel", headers={
        "Authorization": "Bearer wrong", "Upgrade": "websocket", "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13"})
    assert resp.status == 401
    assert (await resp.json())["code"] == "UnauthorizedUserError"  # the master's own answer


@pytest.mark.parametrize(("forwarded", "shows_data_dir"), [
    pytest.param("127.0.0.1", True, id="a-local-caller"),
    pytest.param("10.1.2.3", False, id="a-remote-caller"),
])
async def test_the_master_takes_the_callers_address_from_the_front(fronted: Fronted, forwarded: str,
                                                                    shows_data_dir: bool) -> None:
    info = await fronted.direct("/api/v2/info", {"X-Forwarded-For": forwarded})
    assert ("dataDir" in info) is shows_data_dir


async def test_metrics_hold_the_fronts_timings_in_the_masters_family(fronted: Fronted) -> None:
    api = fronted.api
    await api.call("GET", "/api/v2/jobs")
    await api.call("GET", "/api/v2/virtual-clusters")
    resp = await api.client.get("/metrics")
    parsed = list(text_string_to_metric_families(await resp.text()))
    names = [f.name for f in parsed]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)  # each in one group
    families = {f.name: f for f in parsed}
    routes = {s.labels["route"] for s in families["pai_rest_request_duration_seconds"].samples
              if s.name.endswith("_count")}
    assert {"/api/v2/jobs", "/api/v2/virtual-clusters"} <= routes  # the front's, the master's
    assert "/{tail:.*}" not in routes and "pai_jobs" in families  # no pass-through timed twice; the master's own


def test_merged_metrics_keeps_a_family_in_one_group() -> None:
    master = ("# HELP a_total A\n# TYPE a_total counter\na_total 1.0\n"
              "# HELP pai_rest_request_duration_seconds R\n# TYPE pai_rest_request_duration_seconds histogram\n"
              'pai_rest_request_duration_seconds_count{route="/m"} 2.0\n'
              "# HELP b B\n# TYPE b gauge\nb 3.0\n")
    front = ("# HELP pai_rest_request_duration_seconds R\n# TYPE pai_rest_request_duration_seconds histogram\n"
             'pai_rest_request_duration_seconds_count{route="/f"} 5.0\n'
             "# HELP c C\n# TYPE c gauge\nc 4.0\n")
    lines = merged_metrics(master, front).splitlines()
    assert lines[5:8] == ['pai_rest_request_duration_seconds_count{route="/m"} 2.0',
                          'pai_rest_request_duration_seconds_count{route="/f"} 5.0', "# HELP b B"]
    assert lines[-3:] == ["# HELP c C", "# TYPE c gauge", "c 4.0"]  # only the front's: added whole
    assert len(lines) == 13


def port_of(fronted: Fronted) -> int:
    port = fronted.api.client.port
    assert port is not None
    return port


async def exchange(port: int, raw: bytes, answers: int = 1) -> list[bytes]:
    """Send ``raw`` on one new connection and read ``answers`` HTTP answers (each with its Content-Length)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    found = []
    try:
        writer.write(raw)
        for _ in range(answers):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            found.append(head.split(b"\r\n")[0] + b"\n" + await reader.readexactly(length))
    finally:
        writer.close()
    return found


def post(token: str, body: bytes, path: str = "/api/v2/jobs") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def get(token: str, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode()


async def test_a_submission_goes_to_the_master_with_its_connection(fronted: Fronted) -> None:
    assert fronted.link is not None
    token = await fronted.api.login()
    port = port_of(fronted)
    adopted = fronted.link.adopted
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:  # the submission, then a read on the same connection: the master answers both (the front closed its copy)
        for raw in (post(token, json.dumps(JOB).encode()), get(token, "/api/v2/jobs/admin~j1")):
            writer.write(raw)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            body = json.loads(await reader.readexactly(length))
            assert head.split(b" ")[1] in (b"202", b"200"), body
    finally:
        writer.close()
    assert body["name"] == "j1"
    assert fronted.link.adopted == adopted + 1


async def test_the_fronts_token_cache_stays_warm_through_submissions(fronted: Fronted) -> None:
    api = fronted.api
    token, port, front = await api.login(), port_of(fronted), api.client.app
    assert front is not None
    front_launcher = front[LAUNCHER]
    # each exchange on a connection of its own: a connection that wrote may have been handed to the master
    assert (await exchange(port, get(token, "/api/v2/jobs")))[0].startswith(b"HTTP/1.1 200")
    assert front_launcher.accounts.cached_caller(token)[0]  # the front has looked the token up
    assert (await exchange(port, post(token, json.dumps(JOB).encode())))[0].startswith(b"HTTP/1.1 202")
    assert front_launcher.accounts.cached_caller(token)[0]  # a submission changes no token: still cached


async def test_a_revoke_the_front_never_saw_is_followed_on_its_next_read(fronted: Fronted) -> None:
    api = fronted.api
    token, port = await api.login(), port_of(fronted)
    assert (await exchange(port, get(token, "/api/v2/jobs")))[0].startswith(b"HTTP/1.1 200")  # cached by the front
    revoke = f"DELETE /api/v2/tokens/{token} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    assert (await fronted.direct_call(revoke.encode())).startswith(b"HTTP/1.1 200")  # on the master's own socket
    answer = (await exchange(port, get(token, "/api/v2/jobs")))[0]
    assert answer.startswith(b"HTTP/1.1 401") and b"UnauthorizedUserError" in answer


@pytest.mark.parametrize(("name", "raw"), [
    pytest.param("pipelined", lambda token: post(token, json.dumps(JOB).encode()) + get(token, "/api/v2/jobs/admin~j1"),
                 id="a-pipelined-request-after-it"),
    pytest.param("large", lambda token: post(token, json.dumps({**JOB, "description": "x" * MAX_HANDOFF_BYTES})
                                             .encode()), id="larger-than-a-handoff"),
])
async def test_a_request_that_cannot_be_handed_over_passes_through(fronted: Fronted, name: str,
                                                                   raw: Callable[[str], bytes]) -> None:
    assert fronted.link is not None
    token = await fronted.api.login()
    adopted = fronted.link.adopted
    answers = await exchange(port_of(fronted), raw(token), answers=2 if name == "pipelined" else 1)
    assert answers[0].startswith(b"HTTP/1.1 202"), answers[0][:300]
    if name == "pipelined":
        assert answers[1].startswith(b"HTTP/1.1 200") and json.loads(answers[1].split(b"\n", 1)[1])["name"] == "j1"
    assert fronted.link.adopted == adopted  # nothing handed over
