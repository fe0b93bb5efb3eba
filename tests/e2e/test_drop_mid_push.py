"""An agent whose connection drops mid-push converges: the master (in this process, so the test can act between
a decision and its delivery) decides a start, then a stop; each time the agent process is SIGKILLed after the
decision has committed and before the push goes out. Restarted, it runs exactly what the master wants: the task
once, then not at all."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from pai.launcher.service import LauncherConfig
from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig
from pai.rest_server.keys import LOOP
from tests.e2e.harness import free_port, processes_with
from tests.eventually import eventually
from tests.rest_server.conftest import ADMIN_PASSWORD, AGENT_TOKEN

pytestmark = pytest.mark.e2e


class Master:
    """The master's app on a real port, with a hook between each pass's commit and its pushes."""

    def __init__(self, server: TestServer, http: aiohttp.ClientSession, token: str) -> None:
        self.server = server
        self.http = http
        self.auth = {"Authorization": f"Bearer {token}"}
        self.before_push: list[Any] = []  # one-shot callbacks run with the nodes about to be poked

    @property
    def url(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    async def get(self, path: str) -> Any:
        async with self.http.get(self.url + path, headers=self.auth) as r:
            assert r.status == 200, await r.text()
            return await r.json()

    async def send(self, method: str, path: str, body: Any) -> Any:
        async with self.http.request(method, self.url + path, json=body, headers=self.auth) as r:
            assert r.status in (200, 201, 202), await r.text()
            return await r.json()

    async def task(self, key: str) -> dict[str, Any]:
        detail = await self.get(f"/api/v2/jobs/{key}")
        (status,) = detail["taskRoles"]["w"]["taskStatuses"]
        return dict(status)


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[Master]:
    # Heartbeats every 60 s: between its registration and the next minute, the agent learns of a command only
    # through the channel, so killing it before the push means it never received the command.
    config = MasterConfig(data_dir=tmp_path / "master", admin_password=ADMIN_PASSWORD, agent_token=AGENT_TOKEN,
                          tick_seconds=0.05,
                          launcher=LauncherConfig(heartbeat_seconds=60, node_timeout_seconds=300, grace_seconds=2))
    app = make_app(config)
    server = TestServer(app, host="127.0.0.1", port=free_port())
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(str(server.make_url("/api/v2/authn/basic/login")),
                                 json={"username": "admin", "password": ADMIN_PASSWORD}) as r:
                token = (await r.json())["token"]
            m = Master(server, http, token)
            loop = app[LOOP]
            push = loop.notify
            assert push is not None

            async def hooked(nodes: set[str]) -> None:
                while m.before_push:
                    await m.before_push.pop(0)(nodes)
                await push(nodes)

            loop.notify = hooked
            yield m
    finally:
        await server.close()


class Agent:
    def __init__(self, master: Master, tmp: Path) -> None:
        self.args = [sys.executable, "-m", "pai", "agent", "--master", master.url, "--name", "n1", "--address",
                     "127.0.0.2", "--cpus", "2", "--memory-mb", "2048", "--gpus", "0", "--work-dir", str(tmp / "n1"),
                     "--runtime", "process", "--kill-on-exit"]
        self.env = {**os.environ, "PAI_AGENT_TOKEN": AGENT_TOKEN}
        self.log = tmp / "agent.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                         start_new_session=True)

    def kill(self) -> None:
        """SIGKILL the agent alone: its tasks live in sessions of their own."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)


async def test_an_agent_killed_between_decision_and_push_runs_exactly_what_the_master_wants(
        master: Master, tmp_path: Path) -> None:
    agent = Agent(master, tmp_path)
    marker = f"drop-mid-push-{uuid.uuid4().hex[:8]}"
    starts = tmp_path / "starts"
    try:
        agent.start()

        async def ready() -> bool:
            return any(n["name"] == "n1" and n["state"] == "READY" for n in await master.get("/api/v2/nodes"))

        await eventually(timeout=30.0, what="n1 READY", probe=ready)
        kills: list[str] = []

        async def kill_before_push(nodes: set[str]) -> None:
            if "n1" in nodes:
                agent.kill()
                kills.append("killed")

        # 1. A start decided, the agent killed before it is pushed.
        master.before_push.append(kill_before_push)
        body = {"jobName": marker, "image": "busybox", "taskRoles": [
            {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0,
             "command": f"echo started >> {starts}; exec sleep 300 # {marker}"}]}
        job = await master.send("POST", "/api/v2/jobs", body)
        key = str(job["jobName"])
        await eventually(timeout=30.0, what="the kill", probe=lambda: bool(kills))
        assert not starts.exists()  # the agent never received the start
        agent.start()  # it reconnects: registration, the channel's first poke

        async def running() -> bool:
            return (await master.task(key))["taskState"] == "RUNNING"

        await eventually(timeout=30.0, what="the task RUNNING after the reconnect", probe=running)
        await eventually(timeout=30.0, what="its process", probe=lambda: len(processes_with(marker)) == 1)
        attempts = await master.get(f"/api/v2/jobs/{key}/attempts")
        assert len(attempts) == 1
        await asyncio.sleep(1)  # more heartbeats and pokes would start it again if the master or agent erred
        assert starts.read_text().splitlines() == ["started"]
        assert len(processes_with(marker)) == 1

        # 2. A stop decided, the agent killed before it is pushed: its task goes on running meanwhile.
        kills.clear()
        master.before_push.append(kill_before_push)
        await master.send("PUT", f"/api/v2/jobs/{key}/executionType", {"value": "STOP"})
        await eventually(timeout=30.0, what="the kill", probe=lambda: bool(kills))
        assert len(processes_with(marker)) == 1  # nobody told the task to stop
        agent.start()  # the new agent adopts the running task, reports it, and is told to stop it

        async def stopped() -> bool:
            return (await master.get(f"/api/v2/jobs/{key}"))["jobStatus"]["state"] == "STOPPED"

        await eventually(timeout=30.0, what="the job STOPPED", probe=stopped)
        await eventually(timeout=30.0, what="its process gone", probe=lambda: not processes_with(marker))
        assert starts.read_text().splitlines() == ["started"]  # started once, never again
    finally:
        agent.stop()  # with --kill-on-exit it releases its lease: its fence watchdog exits too
        for pid in processes_with(marker):
            os.kill(pid, 9)
