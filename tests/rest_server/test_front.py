"""The read front (pai.rest_server.front) in front of a real master on its Unix socket: what it answers itself,
what it passes through as it came, and what it forgets after a write."""

from __future__ import annotations

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

    async def stop_master(self) -> None:
        await self.master.cleanup()

    async def direct(self, path: str, headers: dict[str, str]) -> Any:
        """A request to the master itself, on its Unix socket."""
        connector = aiohttp.UnixConnector(path=self.master_socket)
        async with aiohttp.ClientSession(connector=connector) as http, http.get("http://master" + path,
                                                                                 headers=headers) as resp:
            return await resp.json()


@pytest.fixture
async def fronted(db_url: str, tmp_path: Path,
                  aiohttp_client: Callable[[web.Application], Awaitable[TestClient[Any, Any]]]
                  ) -> AsyncIterator[Fronted]:
    config = MasterConfig(data_dir=tmp_path / "data", database_url=db_url, admin_password=ADMIN_PASSWORD,
                          agent_token=AGENT_TOKEN, tick_seconds=0.05, list_processes=0)
    path = master_socket_path(config.data_dir)
    config.data_dir.mkdir(parents=True)
    runner = web.AppRunner(make_app(replace(config, front=True)))
    await runner.setup()
    await web.UnixSite(runner, path).start()
    api = Api(await aiohttp_client(make_front_app(config, path)))
    await api.login()
    yield Fronted(api, path, runner)
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


async def test_the_agent_channel_passes_through_both_ways(fronted: Fronted) -> None:
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
