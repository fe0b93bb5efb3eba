"""Nodes: upsert, list, state and heartbeat."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pai.domain.errors import NoNodeError
from pai.domain.node import NodeState
from pai.domain.resources import Resources
from pai.store import nodes
from pai.store.db import Database

from .builders import node


def test_upsert_inserts_then_overwrites(db: Database) -> None:
    first = node("n1", gpu_type="V100", labels={"rack": "a"}, log_port=9000)
    with db.session() as s:
        nodes.upsert_node(s, first)
    with db.session() as s:
        assert nodes.get_node(s, "n1") == first
        assert nodes.get_log_port(s, "n1") == 9000
    second = node(
        "n1",
        address="10.0.0.9",
        total=Resources(4, 32, 1000),
        labels={},
        state=NodeState.UNHEALTHY,
        failed_gpus=(1, 3),
        port_range=(1000, 2000),
        last_heartbeat=77.0,
    )
    with db.session() as s:
        nodes.upsert_node(s, second, log_port=9100)
    with db.session() as s:
        assert nodes.list_nodes(s) == [replace(second, log_port=9100)]
        assert nodes.get_log_port(s, "n1") == 9100


def test_list_is_sorted_by_name(db: Database) -> None:
    with db.session() as s:
        for name in ("gpu-2", "cpu-1", "gpu-10"):
            nodes.upsert_node(s, node(name))
        assert [n.name for n in nodes.list_nodes(s)] == ["cpu-1", "gpu-10", "gpu-2"]


def test_state_and_heartbeat(db: Database) -> None:
    with db.session() as s:
        nodes.upsert_node(s, node("n1"))
        nodes.set_node_state(s, "n1", NodeState.CORDONED)
        nodes.touch_heartbeats(s, {"n1": 123.5, "ghost": 1.0})
    with db.session() as s:
        stored = nodes.get_node(s, "n1")
    assert (stored.state, stored.last_heartbeat, stored.total) == (NodeState.CORDONED, 123.5, node().total)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda s: nodes.get_node(s, "ghost"), id="get"),
        pytest.param(lambda s: nodes.set_node_state(s, "ghost", NodeState.LOST), id="set state"),
        pytest.param(lambda s: nodes.delete_node(s, "ghost"), id="delete"),
        pytest.param(lambda s: nodes.get_log_port(s, "ghost"), id="log port"),
    ],
)
def test_unknown_node(db: Database, call: object) -> None:
    with db.session() as s, pytest.raises(NoNodeError, match="ghost"):
        call(s)  # type: ignore[operator]


def test_delete_node(db: Database) -> None:
    with db.session() as s:
        nodes.upsert_node(s, node("n1"))
        nodes.upsert_node(s, node("n2"))
        nodes.delete_node(s, "n1")
        assert [n.name for n in nodes.list_nodes(s)] == ["n2"]


def test_a_heartbeat_time_never_goes_back(db: Database) -> None:
    with db.session() as s:
        nodes.upsert_node(s, node("n1"))
        nodes.touch_heartbeats(s, {"n1": 200.0})
        nodes.touch_heartbeats(s, {"n1": 150.0})
    with db.session() as s:
        assert nodes.get_node(s, "n1").last_heartbeat == 200.0
