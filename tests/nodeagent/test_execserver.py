"""The agent's /exec WebSocket on a real server, with real runtimes: refusals before the upgrade, the frame
protocol both ways, and connections that go away (client, agent shutdown) leaving no process on the node."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from pai.domain.resources import Resources
from pai.nodeagent.docker_runtime import DockerRuntime
from pai.nodeagent.logserver import LogServer
from pai.nodeagent.paths import AgentPaths
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.nodeagent.runtime import Runtime
from pai.protocol import ContainerStatus
from pai.protocol import exec_frames as frames
from tests.dockerkit import IMAGE
from tests.eventually import eventually
from tests.nodeagent.builders import start_task, wait_status
from tests.nodeagent.conftest import Groups
from tests.nodeagent.execkit import processes_with

TOKEN = "the-agent-token"
MASTER = {"Authorization": f"Bearer {TOKEN}"}


class Agent:
    def __init__(self, runtime: Runtime, server: LogServer, url: str) -> None:
        self.runtime, self.server, self.url = runtime, server, url

    def exec_url(self, attempt_id: str, *argv: str, tty: bool = False, rows: int = 24, cols: int = 80) -> str:
        query = frames.exec_query(argv, tty, rows, cols)
        return str(aiohttp.client.URL(f"{self.url}/exec/{attempt_id}").with_query(query))


async def serve(runtime: Runtime, tmp_path: Path) -> AsyncIterator[Agent]:
    server = LogServer(AgentPaths(tmp_path / "agent"), "127.0.0.1", 0, TOKEN, runtime=runtime)
    port = await server.start()
    yield Agent(runtime, server, f"http://127.0.0.1:{port}")
    await server.close()


@pytest.fixture
async def agent(runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> AsyncIterator[Agent]:
    await runtime.start(start_task("a1", "sleep 3600", env={"FOO": "from the task"}), tmp_path / "a1")
    groups.add(runtime.process_group("a1"))
    await runtime.start(start_task("done", "exit 0"), tmp_path / "done")
    await wait_status(runtime, "done", ContainerStatus.EXITED)
    async for a in serve(runtime, tmp_path):
        yield a


async def frames_until_close(ws: aiohttp.ClientWebSocketResponse) -> list[tuple[int, bytes] | frames.Control]:
    got: list[tuple[int, bytes] | frames.Control] = []
    async for msg in ws:
        got.append(frames.decode_output(msg.data) if msg.type is aiohttp.WSMsgType.BINARY
                   else frames.decode_control(msg.data))
    return got


def joined(got: list[tuple[int, bytes] | frames.Control], stream: int) -> bytes:
    return b"".join(f[1] for f in got if isinstance(f, tuple) and f[0] == stream)


@pytest.mark.parametrize(
    ("path", "headers", "status", "code"),
    [
        pytest.param("/exec/a1?cmd=true", {}, 401, "UnauthorizedUserError", id="no-token"),
        pytest.param("/exec/a1?cmd=true", {"Authorization": "Bearer wrong"}, 401, "UnauthorizedUserError",
                     id="wrong-token"),
        pytest.param("/exec/nosuch?cmd=true", MASTER, 404, "NoTaskError", id="unknown-attempt"),
        pytest.param("/exec/done?cmd=true", MASTER, 409, "TaskNotRunningError", id="exited-attempt"),
        pytest.param("/exec/a1", MASTER, 400, "InvalidParametersError", id="no-cmd"),
        pytest.param("/exec/a1?cmd=sh&tty=1&rows=0", MASTER, 400, "InvalidParametersError", id="zero-rows"),
        pytest.param("/exec/a1?cmd=sh&tty=maybe", MASTER, 400, "InvalidParametersError", id="bad-tty"),
        pytest.param("/exec/a..b?cmd=true", MASTER, 400, "InvalidParametersError", id="dotdot-in-id"),
    ],
)
async def test_refusals_come_before_the_upgrade_as_json(agent: Agent, path: str, headers: dict[str, str],
                                                        status: int, code: str) -> None:
    async with aiohttp.ClientSession() as http:
        for upgrade in (False, True):  # a plain GET, and a WebSocket handshake: the same answer
            if upgrade:
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await http.ws_connect(agent.url + path, headers=headers)
                assert refused.value.status == status
                continue
            async with http.get(agent.url + path, headers=headers) as resp:
                body = await resp.json()
                assert (resp.status, body["code"]) == (status, code)
                assert body["message"]


async def test_a_command_over_the_websocket(agent: Agent, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pai.nodeagent.exec")
    url = agent.exec_url("a1", "sh", "-c", 'echo "$FOO"; echo err >&2; cat; exit 5')
    async with aiohttp.ClientSession() as http, http.ws_connect(url, headers=MASTER) as ws:
        await ws.send_bytes(b"from stdin\n")
        await ws.send_str("not json")  # answered with an error frame; the session goes on
        await ws.send_str(frames.encode_control(frames.Eof()))
        got = await frames_until_close(ws)
    assert joined(got, frames.STDOUT) == b"from the task\nfrom stdin\n"
    assert joined(got, frames.STDERR) == b"err\n"
    errors = [f for f in got if isinstance(f, frames.Error)]
    assert [e.code for e in errors] == ["InvalidParametersError"]
    assert got[-1] == frames.Exit(5)
    ended = await eventually(lambda: [r for r in caplog.records if r.getMessage() == "exec session ended"],
                             what="the session's end logged")
    started = [r for r in caplog.records if r.getMessage() == "exec session started"]
    assert [(r.attempt, r.job) for r in started] == [("a1", "alice~job")]  # type: ignore[attr-defined]
    assert [(r.attempt, r.exit_code) for r in ended] == [("a1", 5)]  # type: ignore[attr-defined]


async def test_a_terminal_over_the_websocket_resizes(agent: Agent) -> None:
    url = agent.exec_url("a1", "sh", "-c", "stty size; read x; stty size", tty=True, rows=33, cols=99)
    async with aiohttp.ClientSession() as http, http.ws_connect(url, headers=MASTER) as ws:
        seen = b""
        while b"33 99" not in seen:
            seen += frames.decode_output(await ws.receive_bytes(timeout=20))[1]
        await ws.send_str(frames.encode_control(frames.Resize(44, 111)))
        await ws.send_bytes(b"go\n")
        got = await frames_until_close(ws)
    assert b"44 111" in joined(got, frames.STDOUT)
    assert got[-1] == frames.Exit(0)


@pytest.mark.parametrize("how", ["close", "drop", "agent-shutdown"])
async def test_a_connection_that_goes_away_leaves_no_process(agent: Agent, how: str) -> None:
    marker = {"close": "sleep 7501", "drop": "sleep 7502", "agent-shutdown": "sleep 7503"}[how]
    http = aiohttp.ClientSession()
    try:
        ws = await http.ws_connect(agent.exec_url("a1", "sh", "-c", f"{marker} & {marker}"), headers=MASTER)
        await eventually(lambda: len(processes_with(marker)) == 2, what="the session's sleeps")
        if how == "close":
            await ws.close()
        elif how == "drop":  # the connection ends without a closing handshake
            await http.close()
        else:
            await agent.server.close()
        await eventually(lambda: not processes_with(marker), what="no sleep left")
    finally:
        await http.close()
    assert agent.runtime.reports()[0].status is ContainerStatus.RUNNING


async def test_docker_a_command_and_a_dropped_connection(tmp_path: Path, docker_host: str) -> None:
    rt = await DockerRuntime.open(tmp_path / "state", base_url=docker_host)
    try:
        cmd = replace(start_task("d1", "sleep 3600", env={"FOO": "in the container"}), image=IMAGE,
                      resources=Resources(0, 1, 64))
        await rt.start(cmd, tmp_path / "d1")
        await wait_status(rt, "d1", ContainerStatus.RUNNING)
        async for agent in serve(rt, tmp_path):
            async with aiohttp.ClientSession() as http:
                url = agent.exec_url("d1", "sh", "-c", 'echo "$FOO"; echo err >&2; exit 4')
                async with http.ws_connect(url, headers=MASTER) as ws:
                    got = await frames_until_close(ws)
                assert (joined(got, 1), joined(got, 2), got[-1]) == (b"in the container\n", b"err\n", frames.Exit(4))
                ws = await http.ws_connect(agent.exec_url("d1", "sleep", "7504", tty=True), headers=MASTER)
                await eventually(lambda: processes_with("sleep 7504"), what="the exec's sleep")
            await eventually(lambda: not processes_with("sleep 7504"), what="no sleep left")  # the session dropped
            async with aiohttp.ClientSession() as http, http.get(agent.exec_url("d1"), headers=MASTER) as resp:
                assert json.loads(await resp.text())["code"] == "InvalidParametersError"
    finally:
        await rt.stop("d1", 0)
        await rt.close()
