"""Reads never queue behind a scheduling pass: with a pass held up on the writer thread (a hook in the test),
token checks and lists are answered meanwhile."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from pai.launcher.service import Launcher
from pai.rest_server.keys import LAUNCHER, LOOP
from tests.eventually import eventually
from tests.rest_server.conftest import AGENT_TOKEN, Api
from tests.rest_server.test_vcs import add_node, job

READS = ["/api/v2/nodes", "/api/v2/virtual-clusters", "/api/v2/storages"]


def hold_passes(launcher: Launcher, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, ...]:
    """The next scheduling pass blocks the writer thread until released."""
    entered, release, left = threading.Event(), threading.Event(), threading.Event()
    real = launcher.schedule_pass

    def held() -> Any:
        entered.set()
        release.wait(20)
        left.set()
        return real()

    monkeypatch.setattr(launcher, "schedule_pass", held)
    return entered, release, left


@pytest.fixture
async def slow_pass(api: Api, monkeypatch: pytest.MonkeyPatch) -> Any:
    entered, release, left = hold_passes(api.client.app[LAUNCHER], monkeypatch)
    yield entered, release, left
    release.set()


async def test_reads_are_answered_while_a_pass_holds_the_writer(api: Api, slow_pass: Any) -> None:
    entered, release, left = slow_pass
    # a pass starts at the next tick and is held; n1's registration may come before it or wait behind it
    registered = asyncio.create_task(add_node(api, "n1"))
    assert await asyncio.to_thread(entered.wait, 10)
    for path in READS:
        status, body = await api.call("GET", path)
        assert status == 200, (path, body)
        assert not left.is_set()  # answered while the pass still held the writer thread
    release.set()
    await registered
    status, _ = await api.call("POST", "/api/v2/jobs", body=job("after"), content_type="application/json")
    assert status == 202  # and writes go on once it is done


async def test_a_quiet_heartbeat_is_answered_while_a_pass_holds_the_writer(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """A heartbeat that reports what the master expects (here: an idle node, nothing to run) needs no
    transaction, so it does not queue behind the pass (pai.launcher.heartbeats)."""
    loop = api.client.app[LOOP]
    passes = loop.passes
    await add_node(api, "n1")
    await eventually(lambda: loop.passes > passes + 1, what="the full pass that follows a registration")
    beat = {"version": 1, "node": "n1", "containers": []}
    status, _ = await api.call("POST", "/api/internal/agents/n1/heartbeat", json_body=beat, token=AGENT_TOKEN)
    assert status == 200  # through the store: the node's quiet view is learnt
    entered, release, left = hold_passes(api.client.app[LAUNCHER], monkeypatch)
    try:
        assert await asyncio.to_thread(entered.wait, 10)
        for _ in range(3):
            status, body = await api.call("POST", "/api/internal/agents/n1/heartbeat", json_body=beat,
                                          token=AGENT_TOKEN)
            assert (status, body["commands"]) == (200, [])
            assert not left.is_set()
    finally:
        release.set()


async def test_heartbeats_that_wait_for_the_writer_are_handled_in_one_transaction(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    loop = api.client.app[LOOP]
    launcher: Launcher = api.client.app[LAUNCHER]
    for name in ("n1", "n2", "n3"):
        await add_node(api, name)  # none has heartbeated: their heartbeats need the store
    batches: list[list[str]] = []
    real = launcher.agent_batch

    def recorded(reqs: Any) -> Any:
        batches.append([r.node_name for r in reqs])
        return real(reqs)

    monkeypatch.setattr(launcher, "agent_batch", recorded)
    entered, release, _ = hold_passes(launcher, monkeypatch)
    try:
        assert await asyncio.to_thread(entered.wait, 10)
        beats = [asyncio.create_task(api.call("POST", f"/api/internal/agents/{n}/heartbeat", token=AGENT_TOKEN,
                                              json_body={"version": 1, "node": n, "containers": []}))
                 for n in ("n1", "n2", "n3")]
        await eventually(lambda: loop._waiting.qsize() == 3, what="three heartbeats waiting for the writer")
    finally:
        release.set()
    assert [status for status, _ in await asyncio.gather(*beats)] == [200, 200, 200]
    assert batches == [["n1", "n2", "n3"]]


async def test_registrations_that_wait_for_the_writer_are_handled_in_one_transaction_in_order(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thousand agents starting at once do not take a transaction each: registrations wait with the heartbeats
    and are handled in order with them (a node's heartbeat after its registration finds it)."""
    loop = api.client.app[LOOP]
    launcher: Launcher = api.client.app[LAUNCHER]
    batches: list[list[tuple[str, str]]] = []
    real = launcher.agent_batch

    def recorded(reqs: Any) -> Any:
        batches.append([(type(r).__name__, r.node_name) for r in reqs])
        return real(reqs)

    monkeypatch.setattr(launcher, "agent_batch", recorded)
    await add_node(api, "n0")
    entered, release, _ = hold_passes(launcher, monkeypatch)
    try:
        assert await asyncio.to_thread(entered.wait, 10)  # the next tick's pass, held
        calls = [asyncio.create_task(add_node(api, name)) for name in ("n1", "n2")]
        await eventually(lambda: loop._waiting.qsize() == 2, what="two registrations waiting for the writer")
        beat = asyncio.create_task(api.call("POST", "/api/internal/agents/n1/heartbeat", token=AGENT_TOKEN,
                                            json_body={"version": 1, "node": "n1", "containers": []}))
        await eventually(lambda: loop._waiting.qsize() == 3, what="and a heartbeat of n1")
    finally:
        release.set()
    await asyncio.gather(*calls)
    assert (await beat)[0] == 200
    assert batches[1:] == [[("RegisterRequest", "n1"), ("RegisterRequest", "n2"), ("HeartbeatRequest", "n1")]]
    status, body = await api.call("GET", "/api/v2/nodes")
    assert status == 200 and {n["name"] for n in body} >= {"n0", "n1", "n2"}


async def test_a_registration_waiting_for_the_writer_shows_its_node_alive(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent that re-registers (after heartbeats that timed out, say) is alive from the moment its message
    arrives, not only once the writer gets to it: its node is not judged silent meanwhile."""
    loop = api.client.app[LOOP]
    launcher: Launcher = api.client.app[LAUNCHER]
    await add_node(api, "n0")
    # its registration went through the store and a pass took its arrival (a pass already under way when it arrived
    # may not have: wait for one that did, before holding the next)
    await eventually(lambda: launcher.heartbeats.pending("n0") is None, what="n0's arrival taken by a pass")
    entered, release, _ = hold_passes(launcher, monkeypatch)
    try:
        assert await asyncio.to_thread(entered.wait, 10)  # the next tick's pass, held
        again = asyncio.create_task(add_node(api, "n0"))
        await eventually(lambda: loop._waiting.qsize() == 1, what="the registration waiting for the writer")
        assert launcher.heartbeats.pending("n0") is not None
    finally:
        release.set()
    await again
