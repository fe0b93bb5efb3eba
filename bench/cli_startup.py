"""CLI start-up benchmark: ``python bench/cli_startup.py [--runs N] [--jobs J]``.

Starts a real ``pai master`` (SQLite in a temporary directory, as bench/master.py starts one), logs in as its
admin, submits J small jobs (default 20; no agent is registered, so they wait and ``pai jobs`` lists them), then
times N runs (default 30) of each of these, one after another, as a user's shell runs them: a fresh process each,
timed from its start to its exit (wall time, output discarded):

  python -c pass     the interpreter's own start, the floor under every command
  pai --help         the console script of this environment, building the command tree and printing it
  pai jobs           the same, listing the admin's jobs from the master (one GET /api/v2/jobs)

The console script runs this checkout (PYTHONPATH is set to it); the session is given by PAI_MASTER_URL,
PAI_TOKEN and PAI_USER, and HOME is a temporary directory (no stored config is read). Printed: median and p90 of
each, side by side, with each command's median less the interpreter's. Figures, not assertions. Target (issue 30):
``pai --help`` and ``pai jobs`` <= 0.3 s wall. On a machine shared with other work the figures move from run to
run: compare runs made close together.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from bench.figures import pct
from bench.master import master_process, wait_healthy

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "bench-password"
MASTER_ENV = {"PAI_ADMIN_PASSWORD": PASSWORD, "PAI_AGENT_TOKEN": "bench-agent-token", "PAI_LOG_LEVEL": "WARNING"}
JOB = {"protocolVersion": 2, "type": "job", "prerequisites": [{"type": "dockerimage", "name": "img", "uri": "busybox"}],
       "taskRoles": {"main": {"instances": 1, "dockerImage": "img", "commands": ["sleep 1"],
                              "resourcePerInstance": {"gpu": 0, "cpu": 1, "memoryMB": 256}}}}


async def prepare(base: str, jobs: int) -> str:
    """The admin's token, after submitting ``jobs`` jobs as the admin."""
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/api/v2/authn/basic/login",
                             json={"username": "admin", "password": PASSWORD}) as r:
            token = str((await r.json())["token"])
        headers = {"Authorization": f"Bearer {token}"}
        for i in range(jobs):
            async with http.post(f"{base}/api/v2/jobs", json={**JOB, "name": f"startup-{i:03d}"},
                                 headers=headers) as r:
                if r.status != 202:
                    raise SystemExit(f"submit: {r.status} {await r.text()}")
    return token


def timed(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    times: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - started)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.decode()[-2000:]}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()
    pai = str(Path(sysconfig.get_path("scripts")) / "pai")
    with tempfile.TemporaryDirectory(prefix="pai-bench-cli-") as tmp_dir:
        tmp = Path(tmp_dir)
        with master_process(tmp, None, 0, MASTER_ENV) as master:
            asyncio.run(wait_healthy(master.url, master.proc, master.log))
            token = asyncio.run(prepare(master.url, args.jobs))
            env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp), "PAI_MASTER_URL": master.url,
                   "PAI_TOKEN": token, "PAI_USER": "admin"}
            env.pop("PAI_DEBUG", None)
            cases = [("python -c pass", [sys.executable, "-c", "pass"]), ("pai --help", [pai, "--help"]),
                     ("pai jobs", [pai, "jobs"])]
            results = [(name, timed(argv, env, args.runs)) for name, argv in cases]
    floor = statistics.median(results[0][1])
    print(f"{'command':<16} {'median':>9} {'p90':>9} {'median - python':>16}   (n={args.runs} each, {args.jobs} jobs)")
    for name, times in results:
        median = statistics.median(times)
        print(f"{name:<16} {median * 1000:6.0f} ms {pct(times, 0.9) * 1000:6.0f} ms {(median - floor) * 1000:13.0f} ms")


if __name__ == "__main__":
    main()
