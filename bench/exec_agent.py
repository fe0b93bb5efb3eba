"""Exec round trip at the agent: ``python bench/exec_agent.py [--runs N]``.

Side by side, in one run on the same Docker Engine (tests/dockerkit.py: vfs storage, busybox image), one running
task container (``sleep``), ``true`` executed in it N times (default 20) each way, one after another:

  agent /exec    a WebSocket to the agent's ``/exec/{attempt}?cmd=true`` (a real LogServer on 127.0.0.1 with the
                 docker runtime): connect, read until the exit frame, close. A new connection per exec, as the
                 master opens one per user session (the HTTP client session is reused).
  docker SDK     the Engine API as docker-py calls it: exec_create, exec_start (output read), exec_inspect.
  docker exec    the CLI, ``docker -H <engine> exec <container> true``, as a user would time it (process start
                 included).

Each way's first exec is a warm-up, not counted. Prints p50, p95 and the mean per way (milliseconds) and the
ratio of the agent's p50 to the CLI's. Figures, not assertions; on a busy machine they move.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pai.domain.resources import Resources
from pai.nodeagent.docker_runtime import DockerRuntime
from pai.nodeagent.logserver import LogServer
from pai.nodeagent.paths import AgentPaths
from pai.protocol import ContainerStatus, StartTask
from pai.protocol import exec_frames as frames
from tests.dockerkit import IMAGE, docker_engine, missing

TOKEN = "bench-agent-token"


async def agent_exec(http: aiohttp.ClientSession, base_url: str, attempt_id: str, argv: tuple[str, ...],
                     token: str = TOKEN) -> int:
    """One exec through an agent's /exec WebSocket: its exit code once the exit frame came."""
    url = f"{base_url}/exec/{attempt_id}"
    async with http.ws_connect(url, params=frames.exec_query(argv), headers={"Authorization": f"Bearer {token}"}) as ws:
        async for msg in ws:
            if msg.type is aiohttp.WSMsgType.TEXT:
                control = frames.decode_control(msg.data)
                if isinstance(control, frames.Exit):
                    return control.code
    raise RuntimeError("the exec ended without an exit frame")


def sdk_exec(client: docker.DockerClient, container: str, argv: tuple[str, ...]) -> int:
    exec_id = client.api.exec_create(container, list(argv))["Id"]
    client.api.exec_start(exec_id)
    return int(client.api.exec_inspect(exec_id)["ExitCode"])


def cli_exec(engine: str, container: str, argv: tuple[str, ...]) -> int:
    return subprocess.run(["docker", "-H", engine, "exec", container, *argv], check=False).returncode


async def timed(runs: int, once: Callable[[], Awaitable[int]]) -> list[float]:
    await once()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        code = await once()
        times.append((time.perf_counter() - start) * 1000)
        if code != 0:
            raise RuntimeError(f"true exited {code}")
    return times


def line(name: str, ms: list[float]) -> str:
    p95 = statistics.quantiles(ms, n=20)[-1] if len(ms) > 1 else ms[0]
    return f"{name:<14} p50 {statistics.median(ms):7.2f} ms   p95 {p95:7.2f} ms   mean {statistics.fmean(ms):7.2f} ms"


async def measure(engine: str, tmp: Path, runs: int) -> dict[str, list[float]]:
    runtime = await DockerRuntime.open(tmp / "state", base_url=engine)
    server = LogServer(AgentPaths(tmp / "agent"), "127.0.0.1", 0, TOKEN, runtime=runtime)
    try:
        cmd = StartTask(attempt_id="bench", job_key="bench~exec", role="r", index=0, image=IMAGE,
                        command="sleep 3600", env={}, resources=Resources(0, 1, 64))
        await runtime.start(cmd, tmp / "bench")
        if runtime.reports()[0].status is not ContainerStatus.RUNNING:
            raise RuntimeError(f"the task container did not start: {runtime.reports()[0]}")
        port = await server.start()
        client = docker.DockerClient(base_url=engine)
        container = f"pai-{cmd.attempt_id}"
        argv = ("true",)
        async with aiohttp.ClientSession() as http:
            results = {
                "agent /exec": await timed(runs, lambda: agent_exec(http, f"http://127.0.0.1:{port}", "bench", argv)),
                "docker SDK": await timed(runs, lambda: asyncio.to_thread(sdk_exec, client, container, argv)),
                "docker exec": await timed(runs, lambda: asyncio.to_thread(cli_exec, engine, container, argv)),
            }
        client.close()
        return results
    finally:
        await server.close()
        await runtime.stop("bench", 0)
        await runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    if (why := missing()) is not None:
        sys.exit(why)
    with docker_engine() as engine, tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp:
        results = asyncio.run(measure(engine, Path(tmp), args.runs))
    for name, ms in results.items():
        print(line(name, ms))
    ratio = statistics.median(results["agent /exec"]) / statistics.median(results["docker exec"])
    print(f"agent /exec p50 / docker exec p50 = {ratio:.2f}")


if __name__ == "__main__":
    main()
