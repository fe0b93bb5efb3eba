"""The exec relay and its sessions in one master process (SQLite and PostgreSQL) against a fake agent: who may not
read the job is refused as every read refuses them; a session whose token is revoked is ended with an error frame."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from pai.protocol import exec_frames as frames
from pai.rest_server import sessions
from tests.eventually import eventually
from tests.rest_server.conftest import Api
from tests.rest_server.test_openapi import World


async def world(api: Api, *setups: str) -> World:
    w = World(api)
    for what in setups:
        await w.setup(what)
    return w


async def test_who_may_not_read_the_job_is_refused_as_every_read_refuses_them(api: Api) -> None:
    w = await world(api, "listening", "bob", "private")
    try:
        for path in ("/api/v2/jobs/admin~r/tasks/w/0/exec?cmd=true", "/api/v2/jobs/admin~r",
                     "/api/v2/jobs/admin~r/tasks/w/0/logs/stdout?follow=true"):
            answer = await w.request("GET", path, token=w.tokens["bob"], websocket=path.endswith("cmd=true"))
            assert (answer.status, answer.body["code"]) == (403, "ForbiddenUserError"), path
            assert "may not read jobs of user admin" in answer.body["message"]
    finally:
        await w.close()


async def test_a_session_whose_token_is_revoked_is_ended_with_an_error_frame(api: Api,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "REFRESH_SECONDS", 0.05)
    w = await world(api, "listening")
    token = await api.login()  # a token of its own, revoked below
    try:
        url = api.client.make_url("/api/v2/jobs/admin~r/tasks/w/0/exec")
        async with aiohttp.ClientSession() as http, http.ws_connect(
                url, params=frames.exec_query(("echo",)), headers={"Authorization": f"Bearer {token}"}) as ws:
            await ws.send_bytes(b"ping")
            assert (await ws.receive(timeout=10)).data == b"\x01ping"  # relayed both ways
            status, _ = await api.call("DELETE", "/api/v2/authn/basic/logout", token=token)
            assert status == 200
            msg = await ws.receive(timeout=10)
            control = frames.decode_control(msg.data)
            assert isinstance(control, frames.Error) and control.code == "UnauthorizedUserError", control
            assert (await ws.receive(timeout=10)).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        async def ended() -> list[dict[str, Any]]:
            events = (await w.admin("GET", "/api/v2/jobs/admin~r/events")).body["data"]
            return [e for e in events if e["reason"] == "exec-ended"]

        (end,) = await eventually(ended, what="the session's end in the job's history")
        assert end["details"]["exitCode"] is None
        assert "invalid or has expired" in end["details"]["reason"]
    finally:
        await w.close()


async def test_a_master_that_shuts_down_ends_its_sessions_and_followers(api: Api) -> None:
    w = await world(api, "listening")
    try:
        url = api.client.make_url("/api/v2/jobs/admin~r/tasks/w/0/exec")
        headers = {"Authorization": f"Bearer {api.token}"}
        async with aiohttp.ClientSession() as http, http.ws_connect(url, params=frames.exec_query(("echo",)),
                                                                    headers=headers) as ws, \
                http.get(api.client.make_url("/api/v2/jobs/admin~r/tasks/w/0/logs/stdout?follow=true"),
                         headers=headers) as follow:
            assert await follow.content.readuntil(b"\n") == b"hello\n"  # the fake agent's log; the task runs on
            await ws.send_bytes(b"ping")
            assert (await ws.receive(timeout=10)).data == b"\x01ping"
            await api.client.app.shutdown()
            control = frames.decode_control((await ws.receive(timeout=10)).data)
            assert isinstance(control, frames.Error) and control.code == "ServerShutdownError", control
            with pytest.raises(aiohttp.ClientPayloadError):  # broken off: the task did not end
                await asyncio.wait_for(follow.content.read(), 10)
    finally:
        await w.close()
