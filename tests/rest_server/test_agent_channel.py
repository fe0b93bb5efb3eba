"""The agent channel: a WebSocket per agent over which the master pokes it when a task of its node changes."""

from __future__ import annotations

import aiohttp

from pai.protocol import Poke
from pai.rest_server.keys import LAUNCHER
from tests.rest_server.conftest import AGENT_TOKEN, Api
from tests.rest_server.test_vcs import add_node, job

AGENT = {"Authorization": f"Bearer {AGENT_TOKEN}"}


async def next_poke(ws: aiohttp.ClientWebSocketResponse, timeout: float = 5.0) -> Poke:
    msg = await ws.receive(timeout=timeout)
    assert msg.type is aiohttp.WSMsgType.TEXT, msg
    return Poke.from_dict(msg.json())


async def test_the_agent_of_a_node_is_poked_when_a_task_is_bound_there_and_when_it_is_stopped(api: Api) -> None:
    await add_node(api, "n1")
    await add_node(api, "n2", cpu=0)  # gets nothing: never poked for n1's task
    async with api.client.ws_connect("/api/internal/agents/n1/channel", headers=AGENT) as n1, \
            api.client.ws_connect("/api/internal/agents/n2/channel", headers=AGENT) as n2:
        assert (await next_poke(n1)).reason == "connected"  # so that a reconnecting agent converges at once
        assert (await next_poke(n2)).reason == "connected"
        status, _ = await api.call("POST", "/api/v2/jobs", body=job("bound"), content_type="application/json")
        assert status == 202
        assert (await next_poke(n1)).reason == "changed"
        status, _ = await api.call("PUT", "/api/v2/jobs/admin~bound/executionType", json_body={"value": "STOP"})
        assert status == 202
        assert (await next_poke(n1)).reason == "changed"
        try:
            msg = await n2.receive(timeout=0.3)
        except TimeoutError:
            msg = None
        assert msg is None  # n2 had nothing to do with it


async def test_the_channel_needs_the_agent_token(api: Api) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        resp = await api.client.get("/api/internal/agents/n1/channel", headers=headers)
        assert resp.status == 401 and (await resp.json())["code"] == "UnauthorizedUserError"


async def test_replies_and_pokes_carry_the_launchers_epoch(api: Api) -> None:
    launcher = api.client.app[LAUNCHER]
    launcher.epoch = 3
    launcher.fencing = False  # epochs set by hand, with no lease behind them (fencing: tests/launcher/test_fencing.py)
    reg = {"version": 1, "node": {"name": "n1", "address": "127.0.0.9",
                                  "resources": {"gpu": 0, "cpu": 4, "memoryMB": 4096}}}
    status, reply = await api.call("POST", "/api/internal/agents/register", json_body=reg, token=AGENT_TOKEN)
    assert (status, reply["epoch"]) == (200, 3)
    beat = {"version": 1, "node": "n1", "containers": []}
    for _ in range(2):  # the second heartbeat is a quiet one, answered from memory
        status, reply = await api.call("POST", "/api/internal/agents/n1/heartbeat", json_body=beat, token=AGENT_TOKEN)
        assert (status, reply["epoch"]) == (200, 3)
    async with api.client.ws_connect("/api/internal/agents/n1/channel", headers=AGENT) as n1:
        assert (await next_poke(n1)) == Poke("connected", epoch=3)
        launcher.lead(4)  # as the Elector's on_elected will
        status, _ = await api.call("POST", "/api/v2/jobs", body=job("bound"), content_type="application/json")
        assert status == 202
        assert (await next_poke(n1)) == Poke("changed", epoch=4)
    status, reply = await api.call("POST", "/api/internal/agents/n1/heartbeat", json_body=beat, token=AGENT_TOKEN)
    assert status == 200 and reply["epoch"] == 4 and [c["type"] for c in reply["commands"]] == ["start"]
