"""Fencing of deposed leaders: an agent refuses the commands of an epoch lower than the highest it has seen."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families

from pai.nodeagent.agent import Agent
from pai.nodeagent.diskguard import DiskGuard
from pai.nodeagent.epoch import EPOCH_FILE, EpochMark, admits
from pai.nodeagent.logfmt import bind, fields_of
from pai.protocol import ContainerStatus, PlatformExit
from tests.diskkit import read_only
from tests.eventually import eventually
from tests.nodeagent.builders import start_task
from tests.nodeagent.fake_master import FakeMaster
from tests.nodeagent.test_agent import config, reported, running

LOG = bind(logging.getLogger("pai.nodeagent"), node="worker-1")


RULE = [  # (highest seen, the message's epoch, admitted)
    pytest.param(0, 0, True, id="unfenced, nothing higher seen"),
    pytest.param(0, 5, True, id="a first lease"),
    pytest.param(5, 5, True, id="the same leader"),
    pytest.param(5, 6, True, id="a new leader"),
    pytest.param(5, 4, False, id="a deposed leader"),
    pytest.param(5, 0, False, id="an unfenced master after a leader"),
]


@pytest.mark.parametrize(("highest", "epoch", "admitted"), RULE)
def test_the_rule(highest: int, epoch: int, admitted: bool) -> None:
    assert admits(highest, epoch) is admitted


async def metrics_of(agent: Agent) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with ClientSession() as http, http.get(f"http://127.0.0.1:{agent.log_port}/metrics") as resp:
        text = await resp.text()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def refusals(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [fields_of(r) for r in caplog.records
            if r.getMessage() == "refused a command of a deposed master" and r.levelno == logging.WARNING]


async def test_a_start_of_a_deposed_leader_never_runs_and_the_current_leaders_do(
        tmp_path: Path, master: FakeMaster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "pai")
    master.send(start_task("unfenced", "sleep 600"))  # epoch 0, nothing higher seen: accepted, as before
    async with running(config(tmp_path, master.url)) as agent:
        await eventually(lambda: reported(master, "unfenced", ContainerStatus.RUNNING), what="the epoch-0 start")
        master.epoch = 5
        await eventually(lambda: agent.epochs.highest == 5, what="the mark raised to 5")
        master.epoch = 4  # a deposed leader still answers
        master.send(start_task("stale", "sleep 600", job_key="alice~stale"))
        await eventually(lambda: agent.epochs.refused["start"] == 1, what="the stale start refused")
        seen = len(master.heartbeats)
        await eventually(lambda: len(master.heartbeats) >= seen + 2, what="two more heartbeats")
        assert master.latest("stale") is None and not agent.paths.attempt("stale").exists()  # never ran
        assert [r.attempt_id for r in agent.supervisor.reports()] == ["unfenced"]
        assert refusals(caplog) == [{"node": "worker-1", "command": "start", "attempt": "stale",
                                     "job": "alice~stale", "epoch": 4, "highest_epoch": 5}]
        figures = await metrics_of(agent)
        assert figures[("pai_node_refused_commands_total", (("node", "worker-1"), ("type", "start")))] == 1
        assert figures[("pai_node_refused_commands_total", (("node", "worker-1"), ("type", "stop")))] == 0
        assert figures[("pai_node_master_epoch", (("node", "worker-1"),))] == 5

        master.epoch = 5
        master.send(start_task("same", "sleep 600"))
        await eventually(lambda: reported(master, "same", ContainerStatus.RUNNING), what="epoch 5's start")
        master.epoch = 6
        master.send(start_task("newer", "sleep 600"))
        await eventually(lambda: reported(master, "newer", ContainerStatus.RUNNING), what="epoch 6's start")
        assert agent.epochs.highest == 6 and agent.epochs.refused["start"] == 1


async def test_the_mark_survives_a_restart_of_the_agent(tmp_path: Path, master: FakeMaster) -> None:
    cfg = config(tmp_path, master.url, kill_on_exit=False)
    master.epoch = 7
    async with running(cfg) as agent:
        await eventually(lambda: agent.epochs.highest == 7, what="the mark at 7")
    assert json.loads((cfg.work_dir / EPOCH_FILE).read_text()) == {"epoch": 7}
    master.epoch = 3  # the deposed leader the restarted agent reaches
    master.send(start_task("stale", "sleep 600"))
    async with running(cfg) as agent:
        assert agent.epochs.highest == 7
        await eventually(lambda: agent.epochs.refused["start"] == 1, what="the stale start refused after a restart")
        assert not agent.paths.attempt("stale").exists()


async def test_a_deposed_leaders_replies_do_not_keep_the_tasks_alive(tmp_path: Path, master: FakeMaster) -> None:
    """The leader hears nothing from this node while a deposed one answers it: it declares the node lost after the
    node timeout and runs its tasks elsewhere, so the agent fences them as if nobody answered."""
    master.node_timeout_seconds, master.fence_grace_seconds, master.epoch = 1.0, 0.2, 5
    master.send(start_task("a1", "sleep 600"))
    async with running(config(tmp_path, master.url)) as agent:
        await eventually(lambda: reported(master, "a1", ContainerStatus.RUNNING), what="running")
        master.epoch = 4
        exited = await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="fenced", timeout=10)
        assert exited.exit_code == PlatformExit.NODE_LOST and agent.fenced


async def test_a_poke_of_a_deposed_leader_is_refused(
        tmp_path: Path, master: FakeMaster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "pai")
    master.heartbeat_seconds, master.epoch = 60.0, 5
    async with running(config(tmp_path, master.url)) as agent:
        await eventually(lambda: agent.registered.is_set() and master._channels, what="registered, channel open")
        master.epoch = 4
        assert await master.poke() == 1
        await eventually(lambda: agent.epochs.refused["poke"] == 1, what="the poke refused")
        assert refusals(caplog) == [{"node": "worker-1", "command": "poke", "reason": "changed", "epoch": 4,
                                     "highest_epoch": 5}]


def test_a_mark_that_cannot_be_written_is_kept_in_memory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / EPOCH_FILE).mkdir()  # not a disk error (EISDIR): one WARNING line, nothing raised
    mark = EpochMark(tmp_path, LOG, on_error=DiskGuard(tmp_path, LOG).failed)
    assert mark.observe(3) and mark.highest == 3
    assert not mark.observe(2)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "cannot read the master's epoch: starting from 0",
        "cannot keep the master's epoch on disk: kept in memory only"]


def test_a_mark_on_a_read_only_work_directory_is_a_disk_failure_and_kept_in_memory(tmp_path: Path) -> None:
    work = tmp_path / "agent"
    work.mkdir()
    disk = DiskGuard(work, LOG)
    mark = EpochMark(work, LOG, on_error=disk.failed)
    assert mark.observe(2)
    with read_only(work):
        assert mark.observe(9) and mark.highest == 9
        assert not mark.admit(8)
        assert disk.failures == {("the master's epoch", "EROFS"): 1} and disk.recent() is not None
    assert EpochMark(work, LOG).highest == 2  # what reached the disk
    assert mark.observe(10) and EpochMark(work, LOG).highest == 10  # writable again: kept again
