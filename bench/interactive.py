"""Into a running job, through the master: ``python bench/interactive.py [--runs N] [--requests N]``.

Everything through a real ``pai master`` (SQLite, one process) and its agent, as a user reaches a task:

1. **exec** (the docker runtime on the test engine of tests/dockerkit.py: vfs storage, the busybox image): one
   running task container, ``true`` executed in it N times (default 20) each way, one after another:

     pai exec (API)   the master's exec WebSocket (``{JOB}/tasks/main/0/exec?cmd=true``, Bearer token): connect,
                      read until the exit frame; the master relays to the agent's /exec, which asks the Engine.
     docker SDK       the Engine API as docker-py calls it: exec_create, exec_start, exec_inspect.
     docker exec      the CLI, ``docker -H <engine> exec <container> true`` (process start included).
     pai exec (CLI)   ``python -m pai exec JOB -- true`` (process start and imports included).

   Goal (issue 28): ``pai exec`` at most 1.5x ``docker exec``. Printed: both ratios of p50, API and CLI.
2. **proxy** (the process runtime): a task serving tests/e2e/taskports_app.py on its port ``web``; N (default 200)
   GETs of a small answer straight to the node's port and through ``/proxy/`` (bench/proxy.py has more: 1 MiB,
   WebSocket, PostgreSQL). Goal: the proxy adds at most 2 ms p50.
3. **ssh session start** (the same task): Debian's OpenSSH client with the user's key (added with
   ``pai ssh-key add``), ``ssh ... true``, a new connection each time: straight to the agent's SSH endpoint on the
   node's port, and through the master (``ProxyCommand`` = ``pai ssh --proxy``, the tunnel WebSocket).

Each way's first run is a warm-up, not counted. Figures, not assertions: on a busy machine they move.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.exec_agent import cli_exec, sdk_exec
from bench.figures import line
from bench.proxy import APP, answers, http_pair
from pai.cli.ssh import proxy_command
from pai.protocol import exec_frames as frames
from tests.dockerkit import IMAGE, containers_labelled, docker_engine, missing
from tests.e2e.harness import Cluster, cluster, wait_for

Timing = list[float]  # seconds


def running_task(c: Cluster, key: str) -> dict[str, object]:
    """The job's task main[0] once it runs (the job is RUNNING as soon as its tasks are placed)."""
    def probe() -> dict[str, object] | None:
        task: dict[str, object] = c.job(key)["taskRoles"]["main"]["taskStatuses"][0]
        return task if task["taskState"] == "RUNNING" else None
    return wait_for(f"{key}'s task running", probe, 60)  # type: ignore[no-any-return]


async def timed(runs: int, once: Callable[[], Awaitable[int]]) -> Timing:
    await once()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        code = await once()
        times.append(time.perf_counter() - start)
        if code != 0:
            raise RuntimeError(f"the command exited {code}")
    return times


async def master_exec(http: aiohttp.ClientSession, c: Cluster, key: str, argv: tuple[str, ...]) -> int:
    """One exec through the master's WebSocket: the exit code once the exit frame came."""
    url = f"{c.url}/api/v2/jobs/{key}/tasks/main/0/exec"
    headers = {"Authorization": f"Bearer {c.api.http.token}"}
    async with http.ws_connect(url, params=frames.exec_query(argv), headers=headers) as ws:
        async for msg in ws:
            if msg.type is aiohttp.WSMsgType.TEXT:
                control = frames.decode_control(msg.data)
                if isinstance(control, frames.Exit):
                    return control.code
                if isinstance(control, frames.Error):
                    raise RuntimeError(f"{control.code}: {control.message}")
    raise RuntimeError("the exec ended without an exit frame")


def user_env(c: Cluster, home: Path) -> dict[str, str]:
    """The CLI's environment for the admin of ``c``."""
    return {**c.env, "PAI_MASTER_URL": c.url, "PAI_TOKEN": c.api.http.token or "", "PAI_USER": "admin",
            "HOME": str(home)}


def run(argv: list[str], env: dict[str, str] | None = None) -> int:
    return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=False).returncode


def exec_part(runs: int, tmp: Path) -> dict[str, Timing]:
    with docker_engine() as engine, cluster(tmp, None, [("node-d", "127.0.0.31", 4)],
                                            agent_args=("--runtime", "docker", "--docker-host", engine)) as c:
        key = c.submit(json.dumps({"jobName": "bench-exec", "image": IMAGE, "taskRoles": [
            {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0,
             "command": "sleep 3600"}]}))
        running_task(c, key)
        container = wait_for("the task's container", lambda: containers_labelled(engine, f"pai.job={key}"), 30)[0]
        client = docker.DockerClient(base_url=engine)
        env = user_env(c, tmp)
        argv = ("true",)

        async def measure() -> dict[str, Timing]:
            async with aiohttp.ClientSession() as http:
                return {
                    "pai exec (API)": await timed(runs, lambda: master_exec(http, c, key, argv)),
                    "docker SDK": await timed(runs, lambda: asyncio.to_thread(sdk_exec, client, container, argv)),
                    "docker exec (CLI)": await timed(runs, lambda: asyncio.to_thread(cli_exec, engine, container,
                                                                                      argv)),
                    "pai exec (CLI)": await timed(runs, lambda: asyncio.to_thread(
                        run, [sys.executable, "-m", "pai", "exec", "bench-exec", "--", *argv], env)),
                }

        try:
            return asyncio.run(measure())
        finally:
            client.close()


def process_part(runs: int, requests: int, tmp: Path) -> dict[str, Timing]:
    with cluster(tmp, None, [("node-p", "127.0.0.32", 4)]) as c:
        env = user_env(c, tmp)
        identity = tmp / "id_bench"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(identity)], check=True)
        if run([sys.executable, "-m", "pai", "ssh-key", "add", str(identity.with_suffix(".pub"))], env) != 0:
            raise RuntimeError("pai ssh-key add failed")
        key = c.submit(json.dumps({"jobName": "bench-ports", "image": "busybox", "taskRoles": [
            {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
             "command": f"exec {sys.executable} {APP}",
             "portList": [{"label": label, "beginAt": 0, "portNumber": 1} for label in ("web", "echo")]}]}))
        task: dict[str, Any] = running_task(c, key)
        prefix = f"/proxy/{key}/main/0/web"
        direct = f"http://{task['containerIp']}:{task['containerPorts']['web']}{prefix}/headers"
        wait_for("the task's app", lambda: answers(direct), 30)
        straight, proxied = asyncio.run(http_pair(direct, c.url + prefix + "/headers", c.api.http.token or "",
                                                  requests))
        options = ["-i", str(identity), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                   "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={tmp / 'known_hosts'}"]
        ssh_direct = ["ssh", *options, "-p", str(task["containerPorts"]["ssh"]), f"root@{task['containerIp']}",
                      "true"]
        through = ["ssh", *options, "-o", f"ProxyCommand={proxy_command(key, 'main', 0, c.url)}",
                   "root@pai-bench", "true"]

        async def ssh_times() -> dict[str, Timing]:
            return {"ssh true, node's port": await timed(runs, lambda: asyncio.to_thread(run, ssh_direct, env)),
                    "ssh true, via master": await timed(runs, lambda: asyncio.to_thread(run, through, env))}

        return {"GET, node's port": straight, "GET, via /proxy/": proxied, **asyncio.run(ssh_times())}


def ratio(results: dict[str, Timing], a: str, b: str) -> str:
    return f"{a} p50 / {b} p50 = {statistics.median(results[a]) / statistics.median(results[b]):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="execs and SSH sessions each way")
    parser.add_argument("--requests", type=int, default=200, help="proxied GETs each way")
    parser.add_argument("--skip-docker", action="store_true", help="only the process runtime's part (proxy, ssh)")
    args = parser.parse_args()
    if not args.skip_docker and (why := missing()) is not None:
        sys.exit(why)
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as name:
        tmp = Path(name)
        for part in ("docker", "process"):
            (tmp / part).mkdir()
        execs = {} if args.skip_docker else exec_part(args.runs, tmp / "docker")
        ports = process_part(args.runs, args.requests, tmp / "process")
    for results in (execs, ports):
        for what, times in results.items():
            print(line(what, times))
    if execs:
        print(ratio(execs, "pai exec (API)", "docker exec (CLI)") + "   (goal <= 1.5)")
        print(ratio(execs, "pai exec (API)", "docker SDK"))
        print(ratio(execs, "pai exec (CLI)", "docker exec (CLI)"))
    added = (statistics.median(ports["GET, via /proxy/"]) - statistics.median(ports["GET, node's port"])) * 1000
    print(f"{'proxy added p50':<28} {added:8.2f} ms   (goal <= 2 ms)")


if __name__ == "__main__":
    main()
