"""The launcher's transactions on a real database: node timeouts and the master's own start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pai.domain.node import NodeState
from pai.domain.resources import Resources
from pai.launcher.service import Launcher, LauncherConfig
from pai.protocol.messages import HeartbeatRequest, NodeInfo, RegisterRequest
from pai.store import nodes
from pai.store.db import Database
from tests.store.conftest import make_database


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with make_database("sqlite", tmp_path) as d:
        yield d


def register(launcher: Launcher, name: str) -> None:
    launcher.register(RegisterRequest(NodeInfo(name, "127.0.0.5", Resources(0, 2, 1024))))


def state(db: Database, name: str) -> NodeState:
    with db.session() as s:
        return nodes.get_node(s, name).state


def test_a_silent_node_is_lost_after_the_timeout_and_back_on_heartbeat(db: Database) -> None:
    clock = Clock(1000.0)
    launcher = Launcher(db, LauncherConfig(node_timeout_seconds=30), clock=clock)
    register(launcher, "n1")
    clock.now = 1029.0
    assert launcher.check_nodes() == []
    clock.now = 1031.0
    assert launcher.check_nodes() == ["n1"]
    assert state(db, "n1") is NodeState.LOST
    launcher.heartbeat(HeartbeatRequest("n1"))
    assert state(db, "n1") is NodeState.READY


def test_a_restarted_master_gives_nodes_a_full_timeout_before_declaring_them_lost(db: Database) -> None:
    clock = Clock(1000.0)
    register(Launcher(db, LauncherConfig(node_timeout_seconds=30), clock=clock), "n1")
    clock.now = 5000.0  # the master was down for over an hour
    restarted = Launcher(db, LauncherConfig(node_timeout_seconds=30), clock=clock)
    assert restarted.check_nodes() == []
    clock.now = 5031.0
    assert restarted.check_nodes() == ["n1"]


def test_a_cordoned_node_that_was_lost_comes_back_cordoned(db: Database) -> None:
    clock = Clock(1000.0)
    launcher = Launcher(db, LauncherConfig(node_timeout_seconds=30), clock=clock)
    register(launcher, "n1")
    with db.session() as s:
        nodes.set_node_state(s, "n1", NodeState.CORDONED)
    clock.now = 1031.0
    assert launcher.check_nodes() == ["n1"]
    assert state(db, "n1") is NodeState.LOST
    launcher.heartbeat(HeartbeatRequest("n1"))
    assert state(db, "n1") is NodeState.CORDONED
    clock.now = 1062.0
    launcher.check_nodes()
    register(launcher, "n1")  # an agent restart re-registers: still cordoned
    assert state(db, "n1") is NodeState.CORDONED
    with db.session() as s:
        nodes.set_node_state(s, "n1", NodeState.READY)
    clock.now = 1093.0
    launcher.check_nodes()
    launcher.heartbeat(HeartbeatRequest("n1"))
    assert state(db, "n1") is NodeState.READY
