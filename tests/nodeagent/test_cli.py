"""``pai agent`` as its own process: flags and environment, signals, --kill-on-exit."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pai.nodeagent import process_group
from pai.nodeagent.cli import agent
from pai.protocol import ContainerStatus, PlatformExit
from tests.eventually import eventually
from tests.nodeagent.builders import start_task
from tests.nodeagent.conftest import Groups
from tests.nodeagent.fake_master import FakeMaster

AGENT = [sys.executable, "-c", "from pai.nodeagent.cli import agent; agent()"]


async def spawn(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *AGENT,
        "--name", "n1", "--work-dir", str(tmp_path / "agent"), "--cpus", "2", "--memory-mb", "512",
        "--label", "zone=a", "--heartbeat", "0.1", "--runtime", "process", *flags,
        env={**os.environ, **(env or {})},
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


def pgid_on_disk(tmp_path: Path, attempt_id: str, groups: Groups) -> int:
    state = json.loads((tmp_path / "agent" / "runtime" / "process" / f"{attempt_id}.json").read_text())
    return groups.add(state["pgid"])


async def test_sigterm_with_kill_on_exit_leaves_no_process(tmp_path: Path, master: FakeMaster, groups: Groups) -> None:
    master.send(start_task("a1", "sleep 600 & sleep 600"))
    (tmp_path / "agent-token").write_text("from-a-file\n")
    proc = await spawn(tmp_path, "--master", master.url, "--kill-on-exit", "--kill-grace", "1",
                       "--token-file", str(tmp_path / "agent-token"))
    await eventually(lambda: master.latest("a1"), what="a1 reported")
    pgid = pgid_on_disk(tmp_path, "a1", groups)
    proc.send_signal(signal.SIGTERM)
    _, stderr = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 0, stderr.decode()
    assert process_group.group_members(pgid) == []
    last = master.latest("a1")
    assert last is not None and (last.status, last.exit_code) == (ContainerStatus.EXITED, PlatformExit.CONTAINER_LOST)
    node = master.registers[0].node
    assert (node.name, node.labels, node.resources.cpu, node.resources.memory_mb) == ("n1", {"zone": "a"}, 2, 512)
    assert set(master.authorizations) == {"Bearer from-a-file"}
    lines = stderr.decode().splitlines()
    assert any("registered with the master" in line and "node=n1" in line for line in lines)
    assert any("attempt started" in line and "node=n1" in line and "attempt=a1" in line for line in lines)


async def test_sigint_leaves_tasks_running_and_reads_master_and_token_from_env(
    tmp_path: Path, master: FakeMaster, groups: Groups
) -> None:
    master.send(start_task("a1", "sleep 600"))
    proc = await spawn(tmp_path, env={"PAI_MASTER_URL": master.url, "PAI_AGENT_TOKEN": "t0k"})
    await eventually(lambda: master.latest("a1"), what="a1 reported")
    pgid = pgid_on_disk(tmp_path, "a1", groups)
    proc.send_signal(signal.SIGINT)
    _, stderr = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 0, stderr.decode()
    assert process_group.group_members(pgid) != []
    assert set(master.authorizations) == {"Bearer t0k"}


async def test_masters_from_the_env_and_the_line_said_when_the_agent_follows_the_leader(
        tmp_path: Path, master: FakeMaster) -> None:
    standby = FakeMaster(standby=True, leader=master.url)
    await standby.start()
    try:
        proc = await spawn(tmp_path, env={"PAI_MASTER_URL": f"{standby.url}, {master.url}/", "PAI_AGENT_TOKEN": "t"})
        await eventually(lambda: master.registers, what="registered with the leader")
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), 15)
    finally:
        await standby.close()
    assert proc.returncode == 0, stderr.decode()
    line = next(x for x in stderr.decode().splitlines() if " following master " in x)
    assert line.endswith(f"following master node=n1 url={master.url} from={standby.url} reason=named-leader")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--label", "novalue"], "is not key=value", id="label-without-equals"),
        pytest.param(["--runtime", "podman"], "Invalid value for '--runtime'", id="unknown-runtime"),
        pytest.param(["--gpus", "-1"], "x>=0", id="negative-gpus"),
        pytest.param(["--master", " , "], "no master URL", id="no-master-url"),
    ],
)
def test_bad_flags_are_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(agent, ["--master", "http://127.0.0.1:1", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_master_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAI_MASTER_URL", raising=False)
    result = CliRunner().invoke(agent, [])
    assert result.exit_code == 2 and "--master" in result.output


async def test_an_agent_without_a_token_does_not_start(tmp_path: Path, master: FakeMaster) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PAI_AGENT_TOKEN"}
    proc = await asyncio.create_subprocess_exec(*AGENT, "--master", master.url, "--work-dir", str(tmp_path / "a"),
                                                env=env, stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 2 and "the master's agent token is required" in stderr.decode()
    assert master.registers == []


async def test_an_agent_without_an_address_and_a_master_elsewhere_does_not_start(tmp_path: Path) -> None:
    """The sample's PAI_AGENT_ADDRESS is empty: an agent left so fails at once, naming it, instead of registering
    a node at 127.0.0.1 that the master and the other nodes cannot reach."""
    proc = await asyncio.create_subprocess_exec(*AGENT, "--master", "http://master.example:9188", "--token", "t",
                                                "--address", "", "--work-dir", str(tmp_path / "a"),
                                                stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 1, stderr.decode()
    assert ("Error: --address (PAI_AGENT_ADDRESS in /etc/pai/agent.env) is not set but the master "
            "http://master.example:9188 is not on this machine") in stderr.decode()
    assert not (tmp_path / "a").exists()  # nothing started
