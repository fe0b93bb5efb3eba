"""The agent loop against a real HTTP master stand-in: register, heartbeat, commands, retries, shutdown."""

from __future__ import annotations

import asyncio
import logging
import shlex
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pai.nodeagent import logcap, process_group
from pai.nodeagent.agent import Agent, AgentConfig
from pai.nodeagent.logfmt import fields_of
from pai.nodeagent.masters import parse_urls
from pai.nodeagent.paths import LogStream
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.nodeagent.resources import Nvml
from pai.protocol import ContainerReport, ContainerStatus, GpuHealth, PlatformExit
from tests.eventually import eventually
from tests.nodeagent.builders import start_task, stop_task
from tests.nodeagent.conftest import Groups
from tests.nodeagent.fake_master import FakeMaster


def config(tmp_path: Path, master_url: str, **changes: Any) -> AgentConfig:
    base = AgentConfig(
        masters=parse_urls(master_url),
        name="worker-1",
        address="127.0.0.1",
        work_dir=tmp_path / "agent",
        gpus=2,
        cpus=4,
        memory_mb=1024,
        gpu_type="K80",
        labels={"rack": "r1"},
        heartbeat_seconds=0.1,
        token="s3cret",
        kill_on_exit=True,
        kill_grace_seconds=1.0,
        backoff_seconds=0.05,
        max_backoff_seconds=0.2,
        watchdog=False,  # tests/nodeagent/test_fence.py runs the watchdog
        runtime="process",
    )
    return replace(base, **changes)


@asynccontextmanager
async def running(cfg: AgentConfig) -> AsyncIterator[Agent]:
    agent = Agent(cfg, nvml=Nvml(None))
    task = asyncio.create_task(agent.run())
    try:
        yield agent
    finally:
        agent.request_stop()
        await task


def reported(master: FakeMaster, attempt_id: str, status: ContainerStatus) -> ContainerReport | None:
    report = master.latest(attempt_id)
    return report if report is not None and report.status is status else None


def pgid_of(agent: Agent, attempt_id: str, groups: Groups) -> int:
    runtime = agent.supervisor.runtime
    assert isinstance(runtime, ProcessRuntime)
    return groups.add(runtime.process_group(attempt_id))


async def test_registers_with_its_node_info_then_heartbeats(tmp_path: Path, master: FakeMaster) -> None:
    async with running(config(tmp_path, master.url)) as agent:
        await eventually(lambda: len(master.heartbeats) >= 2, what="two heartbeats")
    register = master.registers[0]
    node = register.node
    assert (node.name, node.address, node.gpu_type, node.labels, node.runtime) == (
        "worker-1",
        "127.0.0.1",
        "K80",
        {"rack": "r1"},
        "process",
    )
    assert (node.resources.gpu, node.resources.cpu, node.resources.memory_mb) == (2, 4, 1024)
    assert node.log_port == agent.log_port != 0
    assert register.gpus == (GpuHealth(0), GpuHealth(1))
    assert master.heartbeats[0].node == "worker-1"
    assert master.heartbeats[0].gpus == (GpuHealth(0), GpuHealth(1))
    assert set(master.authorizations) == {"Bearer s3cret"}


async def test_runs_a_start_then_a_stop_from_the_replies(tmp_path: Path, master: FakeMaster, groups: Groups) -> None:
    master.send(start_task("a1", "echo hi; sleep 600 & sleep 600"))
    async with running(config(tmp_path, master.url)) as agent:
        running_report = await eventually(lambda: reported(master, "a1", ContainerStatus.RUNNING), what="running")
        assert running_report.started_at is not None
        pgid = pgid_of(agent, "a1", groups)
        master.send(stop_task("a1", grace=5.0, exit_code=PlatformExit.PREEMPTED, reason="preempted by prod~x"))
        exited = await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="exited")
        assert (exited.exit_code, exited.reason) == (PlatformExit.PREEMPTED, "preempted by prod~x")
        assert process_group.group_members(pgid) == []
        assert (agent.paths.attempt("a1") / "stdout.log").read_text() == "hi\n"


async def test_a_trial_task_imports_the_agents_pai_trial_and_knows_the_master(
        tmp_path: Path, master: FakeMaster) -> None:
    show = "import os, pai_trial; print(pai_trial.__file__); print(os.environ['PAI_MASTER_URL'])"
    trial = {"PAI_TRIAL_ID": "t-1", "PAI_TRIAL_TOKEN": "tok", "PAI_TRIAL_HPARAMS": "{}"}
    master.send(start_task("a1", f"{shlex.quote(sys.executable)} -c {shlex.quote(show)}", env=trial),
                start_task("a2", 'echo "$PAI_MASTER_URL|${PYTHONPATH-unset}"'))
    async with running(config(tmp_path, master.url)) as agent:
        for attempt_id in ("a1", "a2"):
            exited = await eventually(lambda a=attempt_id: reported(master, a, ContainerStatus.EXITED), what="exit")
            assert exited.exit_code == 0, (agent.paths.attempt(attempt_id) / "stderr.log").read_text()
        where, url = (agent.paths.attempt("a1") / "stdout.log").read_text().splitlines()
        assert where.startswith(f"{agent.paths.python}/") and where.endswith("/pai_trial/__init__.py")
        assert url == master.url
        assert (agent.paths.attempt("a2") / "stdout.log").read_text() == f"{master.url}|unset\n"


async def test_an_exit_is_reported_without_waiting_for_the_interval(tmp_path: Path, master: FakeMaster) -> None:
    master.heartbeat_seconds = 60.0
    master.send(start_task("a1", "sleep 0.2; exit 7"))
    async with running(config(tmp_path, master.url)):
        exited = await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="exit report")
        assert exited.exit_code == 7
        assert len(master.heartbeats) <= 2  # the start and the exit woke the agent up, 60 s early


async def test_repeated_starts_and_unknown_stops_are_ignored(tmp_path: Path, master: FakeMaster) -> None:
    cmd = start_task("a1", "echo once; sleep 600")
    master.send(cmd, cmd)
    master.send(cmd, stop_task("nobody"))
    async with running(config(tmp_path, master.url)) as agent:
        await eventually(lambda: len(master.heartbeats) >= 3, what="heartbeats after the commands")
        assert [c.attempt_id for c in master.heartbeats[-1].containers] == ["a1"]
        assert (agent.paths.attempt("a1") / "stdout.log").read_text() == "once\n"


async def test_a_missing_code_dir_fails_the_attempt_without_running_it(tmp_path: Path, master: FakeMaster) -> None:
    master.send(start_task("a1", "touch ran", code_dir=str(tmp_path / "no-such-code"), local_roots=(str(tmp_path),)))
    async with running(config(tmp_path, master.url)) as agent:
        exited = await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="failure report")
        assert exited.exit_code == PlatformExit.CODE_DIR_MISSING
        assert exited.reason is not None and "no-such-code" in exited.reason
        assert list(agent.paths.attempt("a1").iterdir()) == []
    # The failure is remembered across an agent restart.
    async with running(config(tmp_path, master.url)):
        await eventually(lambda: len(master.registers) == 2, what="second registration")
        assert master.registers[1].containers == (exited,)


async def test_the_code_dir_is_fetched_into_the_working_directory(tmp_path: Path, master: FakeMaster) -> None:
    code = tmp_path / "shared" / "code"
    code.mkdir(parents=True)
    (code / "main.sh").write_text('echo "from $(pwd)"\n')
    master.send(start_task("a1", "sh main.sh", code_dir=f"file://{code}", local_roots=(str(tmp_path / "shared"),)))
    async with running(config(tmp_path, master.url)) as agent:
        exited = await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="exit")
        assert exited.exit_code == 0
        workdir = agent.paths.attempt("a1")
        assert (workdir / "stdout.log").read_text() == f"from {workdir / 'code'}\n"


async def test_a_stop_during_the_code_fetch_wins(tmp_path: Path, master: FakeMaster) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "f").write_text("x")
    master.send(start_task("a1", "touch ran", code_dir=str(code), local_roots=(str(tmp_path),)),
                stop_task("a1", reason="stopped early"))
    async with running(config(tmp_path, master.url)) as agent:
        exited = await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="exit")
        assert (exited.exit_code, exited.reason) == (PlatformExit.STOPPED, "stopped early (before it started)")
        assert not (agent.paths.attempt("a1") / "code" / "ran").exists()


@pytest.mark.parametrize(("code_dir", "roots", "words"), [
    pytest.param("{agent}", ("{tmp}",), "overlaps the node agent's work directory", id="its work dir"),
    pytest.param("file://{agent}/attempts", ("{tmp}",), "overlaps the node agent's work directory",
                 id="its attempts folder"),
    pytest.param("{tmp}/shared", (), "localPaths grants none", id="no root any more (the configuration changed)"),
])
async def test_a_code_dir_the_node_may_not_copy_ends_the_attempt_with_local_path_not_allowed(
        tmp_path: Path, master: FakeMaster, code_dir: str, roots: tuple[str, ...], words: str) -> None:
    (tmp_path / "shared").mkdir()
    other = tmp_path / "agent" / "attempts" / "other" / "secrets"
    other.mkdir(parents=True)
    (other / "token").write_text("another job's secret\n")
    fill = {"agent": tmp_path / "agent", "tmp": tmp_path}
    master.send(start_task("a1", "cat */secrets/*; touch ran", code_dir=code_dir.format(**fill),
                           local_roots=tuple(r.format(**fill) for r in roots)))
    async with running(config(tmp_path, master.url)) as agent:
        exited = await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="failure report")
    assert exited.exit_code == PlatformExit.LOCAL_PATH_NOT_ALLOWED
    assert exited.reason is not None and words in exited.reason and code_dir.format(**fill) in exited.reason
    assert list(agent.paths.attempt("a1").iterdir()) == []  # nothing copied, nothing ran


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_waits_for_the_master_and_registers_again_when_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    late = FakeMaster()
    caplog.set_level(logging.INFO, logger="pai.nodeagent")
    async with running(config(tmp_path, f"http://127.0.0.1:{port}")) as agent:
        await eventually(lambda: any(r.msg == "master unavailable" for r in caplog.records), what="a failure")
        await late.start(port)
        try:
            await eventually(lambda: late.heartbeats, what="heartbeats once the master is up")
            late.refuse_heartbeats = 1
            await eventually(lambda: len(late.registers) == 2, what="a new registration after the refusal")
            # the master has the request before the agent has read the reply
            await eventually(agent.registered.is_set, what="registered again")
        finally:
            await late.close()
    refused = [r for r in caplog.records if r.msg == "master refused the request"]
    assert refused and {k: fields_of(refused[0])[k] for k in ("code", "status", "node")} == {
        "code": "NoNodeError",
        "status": 404,
        "node": "worker-1",
    }


async def test_exited_attempts_are_forgotten_after_the_retention(tmp_path: Path, master: FakeMaster) -> None:
    master.send(start_task("a1", "exit 0"))
    async with running(config(tmp_path, master.url, retention_seconds=0.3)) as agent:
        await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="exit")
        await eventually(lambda: master.heartbeats[-1].containers == (), what="forgotten")
        assert agent.supervisor.reports() == []


async def test_stopping_the_agent_leaves_tasks_running_for_the_next_agent(
    tmp_path: Path, master: FakeMaster, groups: Groups
) -> None:
    cfg = config(tmp_path, master.url, kill_on_exit=False)
    master.send(start_task("a1", "sleep 600"))
    async with running(cfg) as agent:
        before = await eventually(lambda: reported(master, "a1", ContainerStatus.RUNNING), what="running")
        pgid = pgid_of(agent, "a1", groups)
    assert process_group.group_members(pgid) != []
    async with running(cfg):
        await eventually(lambda: len(master.registers) == 2, what="second registration")
        assert master.registers[1].containers == (before,)
        master.send(stop_task("a1", grace=1.0))
        await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="stopped")
    assert process_group.group_members(pgid) == []


async def test_kill_on_exit_stops_every_task_and_tells_the_master(
    tmp_path: Path, master: FakeMaster, groups: Groups
) -> None:
    master.send(start_task("a1", "sleep 600 & sleep 600"), start_task("a2", "trap '' TERM; sleep 600"))
    async with running(config(tmp_path, master.url, kill_grace_seconds=0.2)) as agent:
        await eventually(lambda: reported(master, "a2", ContainerStatus.RUNNING), what="running")
        pgids = [pgid_of(agent, a, groups) for a in ("a1", "a2")]
    assert [process_group.group_members(p) for p in pgids] == [[], []]
    final = {c.attempt_id: (c.status, c.exit_code) for c in master.heartbeats[-1].containers}
    assert final == {a: (ContainerStatus.EXITED, PlatformExit.CONTAINER_LOST) for a in ("a1", "a2")}


async def test_the_reported_log_port_serves_the_attempts_logs(tmp_path: Path, master: FakeMaster) -> None:
    master.send(start_task("a1", "echo hello"))
    async with running(config(tmp_path, master.url)):
        await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="exit")
        port = master.registers[0].node.log_port
        url = f"http://127.0.0.1:{port}/logs/a1/stdout"
        async with aiohttp.ClientSession() as http:
            async with http.get(url, headers={"Authorization": "Bearer s3cret"}) as resp:
                assert (resp.status, await resp.text()) == (200, "hello\n")
            async with http.get(url) as resp:
                assert resp.status == 401


async def test_the_agent_reports_its_health_problems(tmp_path: Path, master: FakeMaster) -> None:
    async with running(config(tmp_path, master.url, min_free_disk_mb=10**9, health_seconds=0.1)):
        await eventually(lambda: master.heartbeats, what="a heartbeat")
        problems = master.registers[0].problems
        assert len(problems) == 1 and problems[0].startswith("low disk: ") and "below 1000000000 MB" in problems[0]
        (beat,) = master.heartbeats[-1].problems  # the same problem (its free-space figure moves with the disk)
        assert beat.split(":")[:2] == problems[0].split(":")[:2] and beat.endswith("below 1000000000 MB")


async def test_a_chatty_task_keeps_its_logs_within_the_cap(tmp_path: Path, master: FakeMaster) -> None:
    # 40 x 64 KB lines against a 256 KB cap: the older output is dropped, the newest is served.
    chatty = "i=0; while [ $i -lt 40 ]; do printf \"%065535d\\n\" $i; i=$((i+1)); sleep 0.05; done; echo last line"
    master.send(start_task("a1", chatty))
    async with running(config(tmp_path, master.url, max_log_bytes=256 << 10, log_cap_seconds=0.05)) as agent:
        await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="exit", timeout=30)
        log = agent.paths.log_file("a1", LogStream.STDOUT)
        assert logcap.dropped(log) > 0 and logcap.size(log) < 2 * (256 << 10) + 2 * 65536
        url = f"http://127.0.0.1:{agent.log_port}/logs/a1/stdout?tail=10"
        async with aiohttp.ClientSession() as http, http.get(url, headers={"Authorization": "Bearer s3cret"}) as resp:
            assert await resp.text() == "last line\n"
            assert int(resp.headers["X-Log-Dropped"]) == logcap.dropped(log)


async def test_a_poke_over_the_channel_brings_the_commands_at_once(tmp_path: Path, master: FakeMaster) -> None:
    master.heartbeat_seconds = 60.0  # without the poke, the start would wait a minute for the next heartbeat
    async with running(config(tmp_path, master.url)) as agent:
        await eventually(lambda: agent.registered.is_set() and master._channels, what="registered, channel open")
        assert master.heartbeats == []
        master.send(start_task("a1", "sleep 30"))
        assert await master.poke() == 1
        running_report = await eventually(lambda: reported(master, "a1", ContainerStatus.RUNNING),
                                          what="a1 reported running", timeout=5)
        assert running_report.status is ContainerStatus.RUNNING  # started, and reported without a heartbeat tick
