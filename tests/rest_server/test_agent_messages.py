"""Malformed agent messages are a 400 naming the field and the rule, never a 500; and what agents send passes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pai.domain.resources import Resources
from pai.jobspec import agentmsg
from pai.jobspec.agentmsg import check_agent_message
from pai.protocol import ContainerReport, ContainerStatus, GpuHealth, HeartbeatRequest, NodeInfo, RegisterRequest
from tests.rest_server.conftest import AGENT_TOKEN, Api

NODE = {"name": "n1", "address": "127.0.0.9", "resources": {"gpu": 1, "cpu": 4, "memoryMB": 4096}}
REPORT = {"attemptId": "a1", "jobKey": "u~j", "role": "w", "index": 0, "status": "running"}


def register(**over: Any) -> dict[str, Any]:
    return {"version": 1, "node": {**NODE, **over.pop("node", {})}, **over}


CASES = [
    pytest.param(register(node={"name": None}), "node.name", "None is not of type string", id="name not a string"),
    pytest.param({"version": 1}, "node", "is required", id="no node"),
    pytest.param(register(node={"resources": "x"}), "node.resources", "not of type object", id="resources a string"),
    pytest.param(register(node={"resources": {"gpu": -1, "cpu": 1, "memoryMB": 1}}), "node.resources.gpu",
                 "less than the minimum of 0", id="negative GPUs"),
    pytest.param(register(node={"resources": {"gpu": 10**30, "cpu": 1, "memoryMB": 1}}), "node.resources.gpu",
                 "greater than the maximum of 1024", id="absurd GPUs"),
    pytest.param(register(node={"labels": [1]}), "node.labels", "not of type object", id="labels a list"),
    pytest.param(register(node={"logPort": 70000}), "node.logPort", "greater than the maximum", id="bad port"),
    pytest.param(register(containers="x"), "containers", "not of type array", id="containers a string"),
    pytest.param(register(containers=[{**REPORT, "status": "weird"}]), "containers[0].status", "weird",
                 id="unknown status"),
    pytest.param(register(containers=[{**REPORT, "index": "x"}]), "containers[0].index", "not of type integer",
                 id="index a string"),
    pytest.param(register(gpus=[{"index": "a"}]), "gpus[0].index", "not of type integer", id="gpu index"),
    pytest.param(register(problems=5), "problems", "not of type array", id="problems a number"),
    pytest.param(register(version=2), "version", "1", id="another version"),
]


@pytest.mark.parametrize(("body", "field", "says"), CASES)
async def test_a_malformed_register_is_400_naming_the_field(api: Api, body: Any, field: str, says: str) -> None:
    status, resp = await api.call("POST", "/api/internal/agents/register", json_body=body, token=AGENT_TOKEN)
    assert (status, resp["code"]) == (400, "InvalidParametersError"), resp
    assert resp["message"].startswith(f"register: {field}: ") and says in resp["message"], resp["message"]
    status, nodes = await api.call("GET", "/api/v2/nodes")
    assert status == 200 and nodes == []  # nothing stored


async def test_a_malformed_heartbeat_is_400_naming_the_field(api: Api) -> None:
    body = {"version": 1, "node": "n1", "containers": [{**REPORT, "jobKey": 5}]}
    status, resp = await api.call("POST", "/api/internal/agents/n1/heartbeat", json_body=body, token=AGENT_TOKEN)
    assert status == 400 and resp["message"] == "heartbeat: containers[0].jobKey: 5 is not of type string"


def test_what_agents_send_passes() -> None:
    node = NodeInfo("gpu-1", "10.0.0.7", Resources(8, 64, 512_000), "NVIDIA H100", {"rack": "r1"}, 9187, "docker",
                    81559)
    reports = (ContainerReport("a1", "u~j", "w", 3, ContainerStatus.EXITED, -130, "killed", 1.5e9, 1.6e9),
               ContainerReport("a2", "u~j", "w", 4, ContainerStatus.RUNNING))
    gpus = (GpuHealth(0), GpuHealth(1, False, 2))
    check_agent_message(RegisterRequest(node, reports, gpus, ("disk low",)).to_dict(), "register")
    check_agent_message(HeartbeatRequest("gpu-1", reports, gpus, ()).to_dict(), "heartbeat")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _paths(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*at, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*at, i))
    return out


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[path[0]] = _replaced(doc[path[0]], path[1:], value)
    return copy


def _valid(check: Any, doc: Any) -> bool:
    try:
        check(doc)
    except Exception:
        return False
    return True


VALID = register(containers=[{**REPORT, "exitCode": 1, "startedAt": 1.5e9}], gpus=[{"index": 0, "healthy": True}],
                 problems=["disk low"])


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.data())
def test_the_compiled_schema_accepts_nothing_jsonschema_refuses(data: st.DataObject) -> None:
    """The compiled check lets a message through on its own; what it refuses, jsonschema judges. So it must
    never accept what jsonschema refuses (refusing what jsonschema accepts would only be slower)."""
    path = data.draw(st.sampled_from(_paths(VALID)))
    doc = _replaced(VALID, path, data.draw(JSON))
    kind = data.draw(st.sampled_from(["register", "heartbeat"]))
    if kind == "heartbeat":
        doc = {k: v for k, v in doc.items() if k != "node"} | {"node": "n1"} if isinstance(doc, dict) else doc
    fast = _valid(agentmsg._compiled(kind), doc)
    slow = _valid(lambda d: agentmsg._validator(kind).validate(d), doc)
    assert not fast or slow, doc


@pytest.mark.parametrize(("body", "field", "says"), CASES)
def test_the_compiled_schema_refuses_every_malformed_register(body: Any, field: str, says: str) -> None:
    assert not _valid(agentmsg._compiled("register"), body)
