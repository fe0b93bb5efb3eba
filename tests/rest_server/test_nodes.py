"""Node state changes by an admin: a cordoned node gets no new task."""

from __future__ import annotations

import asyncio

from pai.store import users
from tests.rest_server.conftest import AGENT_TOKEN, Api
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
    await api.write(lambda s: users.create_user(s, "bob", "bob-password"))
    await api.login("bob", "bob-password")
    status, body = await api.call("PUT", "/api/v2/nodes/n1/state", json_body={"value": "CORDONED"})
    assert status == 403


async def heartbeat(api: Api, node: str, containers: list[dict[str, object]]) -> dict[str, object]:
    from tests.rest_server.conftest import AGENT_TOKEN

    status, reply = await api.call("POST", f"/api/internal/agents/{node}/heartbeat",
                                   json_body={"version": 1, "node": node, "containers": containers},
                                   token=AGENT_TOKEN)
    assert status == 200, reply
    return dict(reply)


async def wait_state(api: Api, key: str, state: str) -> dict[str, object]:
    for _ in range(100):
        _, detail = await api.call("GET", f"/api/v2/jobs/{key}")
        if detail["jobStatus"]["state"] == state:
            return dict(detail)
        await asyncio.sleep(0.05)
    raise AssertionError(f"{key} never reached {state}: {detail}")


async def test_draining_a_node_moves_its_jobs_to_other_nodes(api: Api) -> None:
    await add_node(api, "n1")
    await api.call("POST", "/api/v2/jobs", body=job("d"), content_type="application/json")
    detail = await wait_state(api, "admin~d", "RUNNING")
    task = detail["taskRoles"]["w"]["taskStatuses"][0]  # type: ignore[index]
    attempt = task["containerId"]
    running = {"attemptId": attempt, "jobKey": "admin~d", "role": "w", "index": 0, "status": "running"}
    await heartbeat(api, "n1", [running])
    await add_node(api, "n2")
    status, _ = await api.call("PUT", "/api/v2/nodes/n1/state", json_body={"value": "DRAINING"})
    assert status == 200
    for _ in range(100):  # the next pass stops the task on n1 ...
        reply = await heartbeat(api, "n1", [running])
        stops = [c for c in reply["commands"] if c["type"] == "stop"]  # type: ignore[union-attr, index]
        if stops:
            break
        await asyncio.sleep(0.05)
    assert stops[0]["attemptId"] == attempt and stops[0]["exitCode"] == -300
    await heartbeat(api, "n1", [{**running, "status": "exited", "exitCode": -300}])
    detail = await wait_state(api, "admin~d", "RUNNING")  # ... and the job runs again, on n2
    assert detail["taskRoles"]["w"]["taskStatuses"][0]["containerNodeName"] == "n2"  # type: ignore[index]
    kinds = [e["kind"] for e in detail["events"]]  # type: ignore[union-attr, index]
    assert "preempted" in kinds and "requeued" in kinds
    status = detail["jobStatus"]  # a requeue the platform caused: OpenPAI's retries, not counted against retryCount
    assert status["retryDetails"] == {"user": 0, "platform": 1, "resource": 0}  # type: ignore[index]
    assert status["retries"] == 1 and status["attemptId"] == 1  # type: ignore[index]


async def test_an_unhealthy_node_gets_nothing_new_and_says_why(api: Api) -> None:
    await add_node(api, "n1")
    problem = "the Docker Engine does not answer: connection refused"
    beat = {"version": 1, "node": "n1", "problems": [problem]}
    status, _ = await api.call("POST", "/api/internal/agents/n1/heartbeat", json_body=beat, token=AGENT_TOKEN)
    assert status == 200
    _, nodes = await api.call("GET", "/api/v2/nodes")
    assert (nodes[0]["state"], nodes[0]["healthy"], nodes[0]["problems"]) == ("READY", False, [problem])
    await api.call("POST", "/api/v2/jobs", body=job("h"), content_type="application/json")
    await asyncio.sleep(0.5)  # several scheduling passes (tick 0.05 s)
    assert await state_of(api, "admin~h") == "WAITING"
    beat["problems"] = []
    await api.call("POST", "/api/internal/agents/n1/heartbeat", json_body=beat, token=AGENT_TOKEN)
    for _ in range(100):
        if await state_of(api, "admin~h") == "RUNNING":
            break
        await asyncio.sleep(0.05)
    assert await state_of(api, "admin~h") == "RUNNING"
    _, nodes = await api.call("GET", "/api/v2/nodes")
    assert (nodes[0]["healthy"], nodes[0]["problems"]) == (True, [])


async def test_gpu_model_memory_and_failed_gpus_reach_the_node_listing(api: Api) -> None:
    reg = {"version": 1, "node": {"name": "g1", "address": "127.0.0.9", "gpuType": "NVIDIA H100 80GB HBM3",
                                  "gpuMemoryMB": 81559, "resources": {"gpu": 2, "cpu": 16, "memoryMB": 65536}},
           "gpus": [{"index": 0, "healthy": True}, {"index": 1, "healthy": False, "eccErrors": 3}]}
    status, _ = await api.call("POST", "/api/internal/agents/register", json_body=reg, token=AGENT_TOKEN)
    assert status == 200
    _, nodes = await api.call("GET", "/api/v2/nodes")
    g1 = nodes[0]
    assert (g1["gpuType"], g1["gpuMemoryMB"], g1["failedGpus"], g1["healthy"]) == (
        "NVIDIA H100 80GB HBM3", 81559, [1], False)
