"""Node state changes by an admin: a cordoned node gets no new task."""

from __future__ import annotations

import asyncio

from pai.rest_server.keys import DB
from pai.store import users
from tests.rest_server.conftest import Api
from tests.rest_server.test_vcs import add_node, job


async def state_of(api: Api, key: str) -> str:
    _, detail = await api.call("GET", f"/api/v2/jobs/{key}")
    return str(detail["jobStatus"]["state"])


async def test_cordoned_node_gets_nothing_new_until_uncordoned(api: Api) -> None:
    await add_node(api, "n1")
    status, body = await api.call("PUT", "/api/v2/nodes/n1/state", json_body={"value": "CORDONED"})
    assert status == 200 and body["state"] == "CORDONED"
    await api.call("POST", "/api/v2/jobs", body=job("c"), content_type="application/json")
    await asyncio.sleep(0.5)  # several scheduling passes (tick 0.05 s)
    assert await state_of(api, "admin~c") == "WAITING"
    _, nodes = await api.call("GET", "/api/v2/nodes")
    assert nodes[0]["state"] == "CORDONED"
    await api.call("PUT", "/api/v2/nodes/n1/state", json_body={"value": "READY"})
    for _ in range(100):
        if await state_of(api, "admin~c") == "RUNNING":
            break
        await asyncio.sleep(0.05)
    assert await state_of(api, "admin~c") == "RUNNING"


async def test_node_state_errors(api: Api) -> None:
    await add_node(api, "n1")
    status, body = await api.call("PUT", "/api/v2/nodes/n1/state", json_body={"value": "LOST"})
    assert status == 400 and "value" in body["message"]
    status, body = await api.call("PUT", "/api/v2/nodes/nope/state", json_body={"value": "CORDONED"})
    assert status == 404 and body["code"] == "NoNodeError"
    with api.client.app[DB].session() as s:
        users.create_user(s, "bob", "bob-password")
    await api.login("bob", "bob-password")
    status, body = await api.call("PUT", "/api/v2/nodes/n1/state", json_body={"value": "CORDONED"})
    assert status == 403
