"""The agent serves the SSH endpoint of every task whose start asks for one, with the node's host key, also for a task
it re-adopted after a restart, and until the task ends."""

from __future__ import annotations

import asyncio
import stat
from dataclasses import replace
from pathlib import Path

from pai.nodeagent.sshd import HOST_KEY_FILE
from pai.protocol import ContainerStatus
from tests.eventually import eventually
from tests.nodeagent.builders import start_task, stop_task
from tests.nodeagent.conftest import Groups
from tests.nodeagent.fake_master import FakeMaster
from tests.nodeagent.sshkit import ADDRESS, access, client, free_port, require_client, run
from tests.nodeagent.test_agent import config, pgid_of, reported, running


async def _answers(argv: list[str]) -> str | None:
    code, out, _ = await run(argv)
    return out if code == 0 else None


async def test_a_task_is_served_across_an_agent_restart_with_the_same_host_key(
        tmp_path: Path, master: FakeMaster, groups: Groups) -> None:
    require_client()
    user = client(tmp_path / "user")
    port = free_port()
    cfg = config(tmp_path, master.url, kill_on_exit=False)
    master.send(replace(start_task("a1", "sleep 600", env={"GREETING": "hi"}), ports={"ssh": (port,)},
                        ssh=access(user.public)))
    ask = user.ssh(port, "echo $GREETING")
    async with running(cfg) as agent:
        await eventually(lambda: reported(master, "a1", ContainerStatus.RUNNING), what="running")
        pgid_of(agent, "a1", groups)
        assert await eventually(lambda: _answers(ask), what="an answer over SSH") == "hi\n"
    key = cfg.work_dir / HOST_KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    async with running(cfg):  # re-adopts a1: known_hosts holds the key the first agent showed
        assert await eventually(lambda: _answers(ask), what="an answer over SSH after the restart") == "hi\n"
        master.send(stop_task("a1", grace=1.0))
        await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="stopped")

        async def refused() -> bool:
            try:
                _, writer = await asyncio.open_connection(ADDRESS, port)
            except ConnectionRefusedError:
                return True
            except ConnectionResetError:
                return False
            writer.close()
            return False

        await eventually(refused, what="no endpoint once the task ended")
