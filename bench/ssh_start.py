"""SSH session start at the agent: ``python bench/ssh_start.py [--runs N] [--docker]``.

One running task (the process runtime; with ``--docker`` also a busybox container on the test engine of
tests/dockerkit.py) served by the agent's SSH endpoint (pai.nodeagent.sshd) on 127.0.0.1, and Debian's OpenSSH
client timed N times (default 20) each way, one after another, a new connection each time (key exchange, public-key
authentication, a session):

  ssh true      ``ssh host true``: the whole start of a command session and its end
  sftp ls       ``sftp -b`` with one ``ls``: the SFTP subsystem's start (its process in the task's files)

and, as the floor the endpoint adds to, ``sh -c true`` started on this machine. The first of each way is a warm-up,
not counted. Prints p50, p95 and the mean (milliseconds). Figures, not assertions; on a busy machine they move.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pai.domain.resources import Resources
from pai.nodeagent.docker_runtime import DockerRuntime
from pai.nodeagent.logfmt import bind
from pai.nodeagent.paths import AgentPaths
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.nodeagent.runtime import Runtime
from pai.nodeagent.sshd import SshEndpoints
from pai.protocol import SshAccess, StartTask
from tests.dockerkit import IMAGE, docker_engine, missing
from tests.nodeagent.sshkit import ADDRESS, Client, client, free_port


async def timed(runs: int, once: Callable[[], Awaitable[int]]) -> list[float]:
    await once()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        code = await once()
        times.append((time.perf_counter() - start) * 1000)
        if code != 0:
            raise RuntimeError(f"exited {code}")
    return times


async def command(argv: list[str]) -> int:
    proc = await asyncio.create_subprocess_exec(*argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return await proc.wait()


def line(name: str, ms: list[float]) -> str:
    p95 = statistics.quantiles(ms, n=20)[-1] if len(ms) > 1 else ms[0]
    return f"{name:<22} p50 {statistics.median(ms):7.2f} ms   p95 {p95:7.2f} ms   mean {statistics.fmean(ms):7.2f} ms"


async def serve(runtime: Runtime, tmp: Path, user: Client, image: str) -> tuple[SshEndpoints, int]:
    paths = AgentPaths(tmp / "agent")
    endpoints = SshEndpoints(runtime, paths, ADDRESS, bind(logging.getLogger("bench")))
    await endpoints.start()
    port = free_port()
    cmd = StartTask(attempt_id="bench", job_key="bench~ssh", role="r", index=0, image=image, command="sleep 3600",
                    env={}, resources=Resources(0, 1, 64))
    await runtime.start(replace(cmd, ports={"ssh": (port,)}, ssh=SshAccess((user.public,))), paths.attempt("bench"))
    for _ in range(500):
        endpoints.sync(runtime.reports())
        if endpoints.port_of("bench") == port:
            return endpoints, port
        await asyncio.sleep(0.02)
    raise RuntimeError(f"the endpoint did not listen: {runtime.reports()}")


async def measure(runtime: Runtime, tmp: Path, runs: int, image: str) -> dict[str, list[float]]:
    user = client(tmp / "user")
    endpoints, port = await serve(runtime, tmp, user, image)
    batch = tmp / "batch"
    batch.write_text("ls\n")
    try:
        return {
            "ssh true": await timed(runs, lambda: command(user.ssh(port, "true"))),
            "sftp ls": await timed(runs, lambda: command(["sftp", *user.options(), "-P", str(port), "-b",
                                                           str(batch), f"someone@{ADDRESS}"])),
        }
    finally:
        await endpoints.close()
        await runtime.stop("bench", 0)
        await runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--docker", action="store_true", help="also a container on the test engine")
    args = parser.parse_args()
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp:
        results["sh -c true (floor)"] = asyncio.run(timed(args.runs, lambda: command(["sh", "-c", "true"])))

        async def process() -> dict[str, list[float]]:
            return await measure(await ProcessRuntime.open(Path(tmp) / "p-state"), Path(tmp) / "p", args.runs, "")

        results |= {f"{k} (process)": v for k, v in asyncio.run(process()).items()}
        if args.docker:
            if (why := missing()) is not None:
                sys.exit(why)
            with docker_engine() as engine:
                async def container() -> dict[str, list[float]]:
                    rt = await DockerRuntime.open(Path(tmp) / "d-state", base_url=engine)
                    return await measure(rt, Path(tmp) / "d", args.runs, IMAGE)

                results |= {f"{k} (docker)": v for k, v in asyncio.run(container()).items()}
    for name, ms in results.items():
        print(line(name, ms))


if __name__ == "__main__":
    main()
