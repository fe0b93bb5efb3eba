"""Fencing: an agent that loses the master stops its tasks; if the agent dies, its lease watchdog does."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pai.nodeagent import attempt_record, process_group
from pai.nodeagent.attempt_record import AttemptRecord
from pai.nodeagent.fence import SLACK_SECONDS, running_groups, watch
from pai.nodeagent.lease import LEASE_FILE, Lease, LeaseState, current, read_lease
from pai.protocol import ContainerStatus, PlatformExit
from tests.eventually import eventually
from tests.nodeagent.builders import start_task
from tests.nodeagent.conftest import Groups
from tests.nodeagent.fake_master import FakeMaster
from tests.nodeagent.test_agent import config, pgid_of, reported, running
from tests.partition import Partition


def _sleeper(state_dir: Path, attempt_id: str, groups: Groups) -> int:
    """A process group recorded in ``state_dir`` as the process runtime records a running attempt."""
    proc = subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600"], start_new_session=True)
    st = process_group.read_stat(proc.pid)
    assert st is not None
    state_dir.mkdir(parents=True, exist_ok=True)
    record = AttemptRecord(attempt_id, "u~j", "w", 0, str(state_dir)).started(proc.pid, st.start_ticks, time.time())
    attempt_record.save(record, state_dir / f"{attempt_id}.json")
    return groups.add(proc.pid)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_new_agent_takes_the_lease_over_without_extending_it(tmp_path: Path) -> None:
    first = Lease(tmp_path, "first")
    first.take_over(100.0, 5.0)
    first.renew(200.0, 5.0)
    second = Lease(tmp_path, "second")
    second.take_over(900.0, 3.0)
    lease = read_lease(tmp_path / LEASE_FILE)
    assert lease is not None and (lease.owner, lease.until, lease.grace) == ("second", 200.0, 3.0)
    second.release()
    third = Lease(tmp_path, "third")
    third.take_over(900.0, 3.0)  # a released lease guards nothing: the new agent starts afresh
    assert read_lease(tmp_path / LEASE_FILE) == type(lease)("third", 900.0, 3.0)


def test_an_expired_lease_of_a_dead_agent_stops_every_running_attempt(tmp_path: Path, groups: Groups) -> None:
    state = tmp_path / "runtime" / "process"
    pgids = [_sleeper(state, f"a{i}", groups) for i in range(2)]
    assert [a for a, _ in running_groups(state)] == ["a0", "a1"]
    Lease(tmp_path, "me").renew(time.monotonic() - 5, 0.5)
    reason = watch(tmp_path, "me", state, _dead_pid(), 0)
    assert reason.startswith("the lease expired and the agent is gone")
    assert [process_group.group_members(p) for p in pgids] == [[], []]


@pytest.mark.parametrize(("change", "expected"), [
    pytest.param(lambda d: Lease(d, "newer").renew(time.monotonic() - 5, 0.5), "another owner", id="taken-over"),
    pytest.param(lambda d: Lease(d, "me").release(), "released", id="released"),
])
def test_the_watchdog_leaves_the_tasks_to_a_newer_agent_or_a_release(tmp_path: Path, groups: Groups, change: object,
                                                                     expected: str) -> None:
    state = tmp_path / "runtime" / "process"
    pgid = _sleeper(state, "a0", groups)
    assert callable(change)
    change(tmp_path)
    assert expected in watch(tmp_path, "me", state, _dead_pid(), 0)
    assert process_group.group_members(pgid) != []


async def test_the_watchdog_process_outlives_a_killed_agent_and_fences_its_tasks(tmp_path: Path,
                                                                                groups: Groups) -> None:
    state = tmp_path / "runtime" / "process"
    pgid = _sleeper(state, "a0", groups)
    # a stand-in agent process that takes the lease and starts the watchdog, then is SIGKILLed
    code = ("import sys, time; from pathlib import Path; from pai.nodeagent.fence import Lease, spawn_watchdog\n"
            "w = Path(sys.argv[1]); Lease(w, 'agent').take_over(time.monotonic() + 1.0, 0.5)\n"
            "p = spawn_watchdog(w, 'agent', w / 'runtime' / 'process'); print(p.pid, flush=True); time.sleep(600)")
    agent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    watchdog_pid = int(agent.stdout.readline())
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    assert process_group.group_members(pgid) != []
    await eventually(lambda: process_group.group_members(pgid) == [], timeout=10, what="the task fenced")
    await eventually(lambda: not process_group.is_running(watchdog_pid, None), timeout=5, what="watchdog gone")
    assert "lease expired: fencing attempts=a0" in (tmp_path / "fence.log").read_text()


@pytest.fixture
async def master() -> AsyncIterator[FakeMaster]:
    m = FakeMaster(node_timeout_seconds=1.0, fence_grace_seconds=0.3)
    await m.start()
    yield m
    await m.close()


async def test_an_agent_without_answers_for_the_node_timeout_stops_its_tasks(tmp_path: Path, master: FakeMaster,
                                                                             groups: Groups) -> None:
    master.send(start_task("a1", "sleep 600"))
    # The agent reaches the master through a proxy that the test cuts: the network between them fails.
    # (Closing the stand-in master instead can wait forever on the agent's keep-alive connection.)
    partition = Partition(int(master.url.rsplit(":", 1)[1]))
    partition.heal()
    async with running(config(tmp_path, partition.url)) as agent:
        await eventually(lambda: reported(master, "a1", ContainerStatus.RUNNING), what="running")
        pgid = pgid_of(agent, "a1", groups)
        assert agent.node_timeout_seconds == 1.0
        partition.cut()
        started = time.monotonic()
        await eventually(lambda: agent.fenced, timeout=5, what="fenced")
        assert time.monotonic() - started >= 0.8
        await eventually(lambda: process_group.group_members(pgid) == [], timeout=5, what="task stopped")
        partition.heal()  # the master answers again: the agent reports how the task ended
        await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), timeout=5, what="exit reported")
        report = master.latest("a1")
        assert report is not None and report.exit_code == PlatformExit.NODE_LOST
        assert report.reason is not None and "fenced" in report.reason
        # the master has the report; the agent is unfenced once it has read the reply
        await eventually(lambda: not agent.fenced, timeout=5, what="no longer fenced")


async def test_an_agent_with_its_watchdog_releases_it_when_it_stops_its_tasks(tmp_path: Path, master: FakeMaster,
                                                                              groups: Groups) -> None:
    master.send(start_task("a1", "sleep 600"))
    async with running(config(tmp_path, master.url, watchdog=True)) as agent:
        await eventually(lambda: reported(master, "a1", ContainerStatus.RUNNING), what="running")
        pgid_of(agent, "a1", groups)
        watchdog = agent._watchdog
        assert watchdog is not None and watchdog.poll() is None
    assert watchdog.poll() is not None  # kill_on_exit: nothing left to guard
    lease = read_lease(tmp_path / "agent" / LEASE_FILE)
    assert lease is not None and lease.released
    assert os.path.exists(tmp_path / "agent" / "fence.log")
    await asyncio.sleep(0)


# ---- the lease by pipe: an agent that cannot write its lease file still holds its watchdog off ---------------

MINE, OLD = LeaseState("me", 100.0, 1.0), LeaseState("before", 50.0, 1.0)


@pytest.mark.parametrize(("filed", "sent", "stale", "channel", "expected"), [
    pytest.param(MINE, None, None, False, (MINE, None), id="no pipe: the file"),
    pytest.param(OLD, None, None, False, (None, "the lease has another owner"), id="no pipe: another owner"),
    pytest.param(OLD, LeaseState("me", 200.0, 1.0), "before", True, (LeaseState("me", 200.0, 1.0), None),
                 id="pipe: the earlier agent's lease left in the file is ignored"),
    pytest.param(MINE, LeaseState("me", 200.0, 1.0), None, True, (LeaseState("me", 200.0, 1.0), None),
                 id="pipe: the later of the two"),
    pytest.param(LeaseState("me", 300.0, 1.0), LeaseState("me", 200.0, 1.0), None, True,
                 (LeaseState("me", 300.0, 1.0), None), id="pipe: the file, when it is later"),
    pytest.param(LeaseState("newer", 10.0, 1.0), MINE, None, True, (None, "the lease has another owner"),
                 id="pipe: a newer agent took over"),
    pytest.param(OLD, LeaseState("me", 0.0, 0.0, released=True), "before", True,
                 (None, "the agent released the lease"), id="pipe: released"),
    pytest.param(None, None, None, True, (None, None), id="pipe: nothing heard yet"),
])
def test_the_lease_the_watchdog_guards(filed: LeaseState | None, sent: LeaseState | None, stale: str | None,
                                       channel: bool, expected: tuple[LeaseState | None, str | None]) -> None:
    assert current("me", filed, sent, stale, channel) == expected


def test_a_lease_sent_down_the_pipe_is_honoured_until_it_runs_out(tmp_path: Path, groups: Groups) -> None:
    state = tmp_path / "runtime" / "process"
    pgid = _sleeper(state, "a0", groups)
    Lease(tmp_path, "before").renew(time.monotonic() - 5, 0.5)  # an earlier agent's, long expired
    read_end, write_end = os.pipe()
    sent = time.monotonic()
    (tmp_path / "blocked").write_text("")  # a file where the lease's directory would be: no lease file
    failures: list[str] = []
    lease = Lease(tmp_path / "blocked" / "work", "me", on_error=lambda what, e: not failures.append(what))
    lease.attach(write_end)
    lease.renew(sent + 1.5, 0.5)  # the file cannot be written: only the pipe carries it
    os.close(write_end)  # and the agent is gone
    reason = watch(tmp_path, "me", state, _dead_pid(), 0, channel=read_end)
    assert reason.startswith("the lease expired and the agent is gone") and failures == ["the lease"]
    assert time.monotonic() - sent >= 1.5 + SLACK_SECONDS
    assert process_group.group_members(pgid) == []
