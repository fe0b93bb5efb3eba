"""Agents follow the leader (issue 27): given several masters, the agent talks to the one that leads, moves when a
standby names another or its master dies, and keeps its tasks across the move."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from pai.nodeagent import process_group
from pai.nodeagent.logfmt import fields_of
from pai.nodeagent.masters import Masters, Move, Reason, parse_urls
from pai.protocol import ContainerStatus
from tests.eventually import eventually
from tests.nodeagent.builders import start_task
from tests.nodeagent.conftest import Groups
from tests.nodeagent.fake_master import FakeMaster
from tests.nodeagent.test_agent import config, pgid_of, reported, running
from tests.nodeagent.test_epoch import metrics_of

Start = Callable[..., Awaitable[FakeMaster]]
A, B, C = "http://a:9186", "http://b:9186", "http://c:9186"


# ---- where the agent goes: the rule ------------------------------------------------------------------------------

NAMED, NONE, GONE = Reason.NAMED_LEADER, Reason.NO_LEADER, Reason.UNREACHABLE
RULE: list[Any] = [  # (the list, the current one's index, the events in turn, the moves, the list after)
    pytest.param((A, B), 0, [{"leader": B}], [Move(B, NAMED, True)], [A, B], id="a standby names the leader"),
    pytest.param((A,), 0, [{"leader": B + "/"}], [Move(B, NAMED, True)], [A, B],
                 id="a leader not in the list is added"),
    pytest.param((A, B, C), 0, [{"leader": None}, {"leader": None}, {"leader": None}],
                 [Move(B, NONE, False), Move(C, NONE, False), Move(A, NONE, False)], [A, B, C],
                 id="no leader: round robin"),
    pytest.param((A, B), 0, [{"unreachable": True}, {"unreachable": True}],
                 [Move(B, GONE, False), Move(A, GONE, False)], [A, B], id="out of reach: round robin"),
    pytest.param((A, B), 0, [{"leader": A}], [Move(B, NONE, False)], [A, B], id="a standby naming itself"),
    pytest.param((A, B, C), 0, [{"leader": C}, {"unreachable": True}], [Move(C, NAMED, True), Move(B, GONE, False)],
                 [A, B, C], id="the named leader fails: the next one after the master that named it"),
    pytest.param((A, B), 0, [{"leader": C}, {"unreachable": True}, {"leader": C}, {"leader": B}],
                 [Move(C, NAMED, True), Move(B, GONE, False), Move(A, NONE, False), Move(B, NAMED, False)],
                 [A, B, C], id="a frozen leader named from a stale lease is not tried again before an answer"),
    pytest.param((A, B, C), 0, [{"unreachable": True}, {"leader": None}, {"leader": None}],
                 [Move(B, GONE, False), Move(C, NONE, False), Move(B, NONE, False)], [A, B, C],
                 id="round robin skips what was unreachable"),
    pytest.param((A, B), 0, [{"leader": B}, {"leader": A}, {"leader": B}],
                 [Move(B, NAMED, True), Move(A, NAMED, False), Move(B, NAMED, False)], [A, B],
                 id="standbys naming each other: backoff, no spinning"),
    pytest.param((A,), 0, [{"unreachable": True}, {"leader": None}], [Move(A, GONE, False), Move(A, NONE, False)],
                 [A], id="one master: it stays"),
]


@pytest.mark.parametrize(("urls", "index", "events", "moves", "after"), RULE)
def test_where_the_agent_goes(urls: tuple[str, ...], index: int, events: list[dict[str, Any]], moves: list[Move],
                              after: list[str]) -> None:
    masters = Masters(urls)
    assert masters.current == urls[index]
    assert [masters.after(**event) for event in events] == moves
    assert masters.urls == after


def test_an_answer_lets_the_next_named_leader_be_followed_at_once() -> None:
    masters = Masters((A, B))
    assert masters.after(leader=B).at_once
    masters.answered()
    assert masters.after(leader=A).at_once


@pytest.mark.parametrize(("text", "urls"), [
    pytest.param("http://a:1", ("http://a:1",), id="one"),
    pytest.param(" http://a:1/ , http://b:2,http://a:1,", ("http://a:1", "http://b:2"), id="blanks, slashes, repeats"),
])
def test_parse_urls(text: str, urls: tuple[str, ...]) -> None:
    assert parse_urls(text) == urls


@pytest.mark.parametrize("text", [pytest.param("", id="empty"), pytest.param(" , ", id="commas")])
def test_parse_urls_refuses_no_url(text: str) -> None:
    with pytest.raises(ValueError, match="no master URL"):
        parse_urls(text)


# ---- the agent against real masters' stand-ins ------------------------------------------------------------------


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    started: list[FakeMaster] = []

    async def start(**fields: Any) -> FakeMaster:
        m = FakeMaster(**fields)
        await m.start()
        started.append(m)
        return m

    yield start
    for m in started:
        await m.close()


def moves(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [{k: v for k, v in fields_of(r).items() if k != "node"} for r in caplog.records
            if r.getMessage() == "following master"]


async def test_a_standby_first_in_the_list_sends_the_agent_to_the_leader(
        tmp_path: Path, start: Start, groups: Groups, caplog: pytest.LogCaptureFixture) -> None:
    leader = await start(epoch=3)
    standby = await start(standby=True, leader=leader.url)
    leader.send(start_task("a1", 'echo "$PAI_MASTER_URL"; sleep 600'))
    async with running(config(tmp_path, f"{standby.url},{leader.url}")) as agent:
        await eventually(lambda: reported(leader, "a1", ContainerStatus.RUNNING), what="a1 running")
        pgid_of(agent, "a1", groups)
        stdout = agent.paths.attempt("a1") / "stdout.log"
        await eventually(lambda: stdout.read_text() == f"{leader.url}\n", what="the task told the leader's URL")
        assert standby.refused >= 1 and standby.registers == [] and agent.masters.current == leader.url
        assert moves(caplog) == [{"url": leader.url, "from": standby.url, "reason": "named-leader"}]
        metrics = await metrics_of(agent)
        assert metrics[("pai_node_master_info", (("node", "worker-1"), ("url", leader.url)))] == 1
        assert await eventually(leader.poke, what="the channel open to the leader") == 1


async def test_a_leader_the_agent_was_not_given_is_followed(tmp_path: Path, start: Start) -> None:
    leader = await start()
    standby = await start(standby=True, leader=leader.url)
    async with running(config(tmp_path, standby.url)) as agent:
        await eventually(lambda: leader.registers, what="registered with the leader")
        assert agent.masters.urls == [standby.url, leader.url]


async def test_no_leader_named_the_agent_tries_the_next_master_in_turn(
        tmp_path: Path, start: Start, caplog: pytest.LogCaptureFixture) -> None:
    gone = await start()
    await gone.close()  # a master whose machine is down
    standby = await start(standby=True)
    leader = await start()
    async with running(config(tmp_path, f"{standby.url},{gone.url},{leader.url}")):
        await eventually(lambda: leader.registers, what="registered with the leader")
    assert moves(caplog)[:2] == [{"url": gone.url, "from": standby.url, "reason": "no-leader"},
                                 {"url": leader.url, "from": gone.url, "reason": "unreachable"}]


async def test_the_leader_dies_and_the_agent_moves_with_its_task_running(
        tmp_path: Path, start: Start, groups: Groups, caplog: pytest.LogCaptureFixture) -> None:
    old = await start(epoch=4, node_timeout_seconds=2.0, fence_grace_seconds=0.3)
    new = await start(standby=True, leader=old.url, node_timeout_seconds=2.0, fence_grace_seconds=0.3)
    old.send(start_task("a1", "sleep 600"))
    caplog.set_level(logging.INFO, "pai")
    async with running(config(tmp_path, f"{old.url},{new.url}")) as agent:
        before = await eventually(lambda: reported(old, "a1", ContainerStatus.RUNNING), what="a1 running")
        pgid = pgid_of(agent, "a1", groups)
        await old.close()  # the leader's machine dies; the standby takes the lease
        new.lead(epoch=5)
        registered = await eventually(lambda: new.registers, what="registered with the new leader")
        # It re-registered with its running attempt, which the new leader's epoch then governs.
        report = next(c for c in registered[0].containers if c.attempt_id == "a1")
        assert (report.status, report.started_at) == (ContainerStatus.RUNNING, before.started_at)
        assert agent.epochs.highest == 5
        assert moves(caplog) == [{"url": new.url, "from": old.url, "reason": "unreachable"}]
        # Past the node timeout after the death: the task still runs, never stopped nor started again.
        await eventually(lambda: len(new.heartbeats) >= 25, what="2.5 s of heartbeats with the new leader")
        assert not agent.fenced and process_group.group_members(pgid) != []
        assert reported(new, "a1", ContainerStatus.RUNNING) is not None
        assert [c.attempt_id for c in new.heartbeats[-1].containers] == ["a1"]
        assert [fields_of(r)["attempt"] for r in caplog.records if r.getMessage() == "attempt started"] == ["a1"]


async def test_a_leader_that_steps_down_sends_the_agent_and_its_channel_to_the_new_one(
        tmp_path: Path, start: Start, groups: Groups) -> None:
    old = await start(epoch=4)
    new = await start(standby=True, leader=old.url)
    async with running(config(tmp_path, f"{old.url},{new.url}")) as agent:
        await eventually(old.poke, what="the channel open to the leader")
        new.lead(epoch=5)
        old.step_down(new.url)
        await eventually(lambda: new.registers, what="registered with the new leader")
        assert await eventually(new.poke, what="the channel open to the new leader") == 1
        assert old._channels == [] and agent.masters.current == new.url
        new.send(start_task("a2", "sleep 600"))  # the new leader's commands run at once: its epoch is higher
        await eventually(lambda: reported(new, "a2", ContainerStatus.RUNNING), what="a2 running")
        pgid_of(agent, "a2", groups)


async def test_standbys_answering_in_turn_do_not_hold_fencing_off(tmp_path: Path, start: Start,
                                                                  groups: Groups) -> None:
    first = await start(node_timeout_seconds=1.0, fence_grace_seconds=0.3)
    second = await start(standby=True, node_timeout_seconds=1.0, fence_grace_seconds=0.3)
    first.send(start_task("a1", "sleep 600"))
    async with running(config(tmp_path, f"{first.url},{second.url}")) as agent:
        await eventually(lambda: reported(first, "a1", ContainerStatus.RUNNING), what="a1 running")
        pgid = pgid_of(agent, "a1", groups)
        first.step_down(None)  # no master leads: each answers NotLeaderError, none is the master's answer
        await eventually(lambda: agent.fenced, timeout=5, what="fenced")
        await eventually(lambda: process_group.group_members(pgid) == [], timeout=5, what="a1 stopped")
        assert first.refused > 1 and second.refused > 1


async def test_one_master_that_is_a_standby_is_waited_for(tmp_path: Path, start: Start,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    master = await start(standby=True)
    caplog.set_level(logging.WARNING, "pai.nodeagent")
    async with running(config(tmp_path, master.url)) as agent:
        await eventually(lambda: master.refused >= 2, what="asked twice")
        master.lead(epoch=7)
        await eventually(lambda: master.registers, what="registered once it leads")
        assert agent.epochs.highest == 7 and agent.masters.urls == [master.url]
    assert moves(caplog) == []
    assert any(r.getMessage() == "the master is a standby and names no leader" for r in caplog.records)
