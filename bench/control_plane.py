"""Control-plane benchmark: ``python bench/control_plane.py [--database sqlite,postgresql] [--workers 1,2,4]
[--runs N] [--burst N]``.

Side by side, in one run, one master after another, each on a fresh database (SQLite in a temporary directory; a
private schema of PostgreSQL's database ``test`` at 127.0.0.1:5432, dropped after): SQLite (``pai master`` as one
process, the embedded baseline) and PostgreSQL with each ``--workers`` count (``pai master`` as the launcher's
process plus gunicorn's arbiter with N API worker processes; the agents are given the launcher's port, as an agent
given the API's URL is sent to the leading launcher). Four real agents (``pai agent``, process runtime, 4 CPUs each,
heartbeats every 1 s) on this machine:

  spawn floor             subprocess.Popen of `sh -c true` and its wait: what running the task itself costs
  submit -> RUNNING       a 1-task job (`sleep 30`): from POST /api/v2/jobs until the task's own state is RUNNING
                          in the job detail (polled every 5 ms); then it is stopped
  submit -> SUCCEEDED     a 1-task job running `true`, until the job is SUCCEEDED
  burst                   N submissions (`true`) from ``--concurrency`` keep-alive connections of one aiohttp client
                          in this process: submissions/s while posting, POST p50 of the first and the last 100, the
                          time until every job has ended, jobs not ended within 10 minutes (lost); and the CPU used
                          while posting by the launcher's process, the API workers, PostgreSQL's processes (all of
                          this machine's), this process (the client), and the whole machine

Figures, not assertions. Targets: RUNNING p50 <= 100 ms, SUCCEEDED p50 <= 150 ms (issue 10); burst POST p50 of the
last 100 within 1.5x of the first 100, 0 lost; 500 submissions/s sustained (issue 27: Slurm's published figure).
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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from bench.figures import line, pct
from bench.master import config_name, configs, cpu_by_role, cpu_delta, machine_busy, master_args
from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.dbkit import database_url
from tests.e2e.harness import ADMIN_PASSWORD, AGENT_TOKEN, TERMINAL, Cluster, stop_process, wait_for

ACTIVE = "WAITING,RUNNING,STOPPING"


def job(name: str, command: str, cpus: int = 1) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": cpus, "memoryMB": 128, "gpuNumber": 0, "command": command}]})


@contextmanager
def cluster(tmp: Path, url: str | None, workers: int, agents: list[tuple[str, str, int]]) -> Iterator[Cluster]:
    """A master (``workers`` 0: one process) and ``agents`` (name, address, CPUs) given its launcher's URL; yields
    once every agent is READY, the admin logged in."""
    args, api_url, launcher_url = master_args(tmp, url, workers)
    env = {**os.environ, "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD, "PAI_AGENT_TOKEN": AGENT_TOKEN}
    env.pop("PAI_DATABASE_URL", None)
    c = Cluster(api_url, MasterApi(HttpClient(api_url, timeout=30)), tmp, env=env, launcher_url=launcher_url)
    with ExitStack() as stack:
        stack.callback(lambda: [stop_process(p) for p in reversed(c.procs.values())])
        c.spawn("master", [*args, "--grace-seconds", "3", "--heartbeat", "1", "--node-timeout", "10"])
        c.wait_master()
        c.api.http.token = c.api.login("admin", ADMIN_PASSWORD)["token"]
        for name, address, cpus in agents:
            c.spawn_agent(name, address, cpus, launcher_url)
        names = {a[0] for a in agents}
        wait_for("agents READY", lambda: names <= c.ready_nodes(), 60)
        yield c


def spawn_floor(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.Popen(["sh", "-c", "true"]).wait()
        times.append(time.perf_counter() - started)
    return times


def task_state(c: Cluster, key: str) -> str:
    tasks = c.tasks(c.job(key))
    return str(tasks[0][1]["taskState"]) if tasks else "WAITING"


def to_running(c: Cluster, runs: int) -> list[float]:
    times = []
    for i in range(runs):
        started = time.perf_counter()
        key = c.submit(job(f"run-{i}-{time.time_ns()}", "sleep 30"))
        while task_state(c, key) != "RUNNING":
            time.sleep(0.005)
        times.append(time.perf_counter() - started)
        c.raw("PUT", f"/api/v2/jobs/{key}/executionType", b'{"value": "STOP"}', "application/json")
        c.wait_state(key, {"STOPPED"}, 30)
    return times


def to_succeeded(c: Cluster, runs: int) -> list[float]:
    times = []
    for i in range(runs):
        started = time.perf_counter()
        key = c.submit(job(f"ok-{i}-{time.time_ns()}", "true"))
        while c.job(key)["jobStatus"]["state"] not in TERMINAL:
            time.sleep(0.005)
        times.append(time.perf_counter() - started)
    return times


async def post_all(base: str, token: str, n: int, concurrency: int) -> tuple[list[float], list[str]]:
    """POST ``n`` jobs from ``concurrency`` keep-alive connections; each POST's time, in order, and the errors."""
    times: list[float] = [0.0] * n
    errors: list[str] = []
    todo = iter(range(n))
    stamp = time.time_ns()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(headers=headers, connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=120)) as http:
        async def poster() -> None:
            for i in todo:
                started = time.perf_counter()
                async with http.post(base + "/api/v2/jobs", data=job(f"burst-{i}-{stamp}", "true")) as resp:
                    body = await resp.read()
                times[i] = time.perf_counter() - started
                if resp.status >= 300:
                    errors.append(f"HTTP {resp.status} {body[:120]!r}")

        await asyncio.gather(*(poster() for _ in range(concurrency)))
    return times, errors


def active_jobs(c: Cluster) -> int:
    return int(c.api.http.json("GET", f"/api/v2/jobs?state={ACTIVE}&limit=1&withTotalCount=true")["totalCount"])


def burst(c: Cluster, n: int, concurrency: int) -> dict[str, float]:
    pid = c.procs["master"].pid
    cpu0, machine0, bench0 = cpu_by_role(pid), machine_busy(), os.times()
    started = time.perf_counter()
    times, errors = asyncio.run(post_all(c.url, str(c.api.http.token), n, concurrency))
    posted = time.perf_counter() - started
    cpu, machine1, bench1 = cpu_delta(cpu0, cpu_by_role(pid)), machine_busy(), os.times()
    with suppress(AssertionError):  # counted as lost below
        wait_for("every job of the burst to end", lambda: active_jobs(c) == 0, 600, 0.5)
    drained, lost = time.perf_counter() - started, active_jobs(c)
    first, last = times[:100], times[-100:]
    machine = (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]) * (os.cpu_count() or 1)
    return {"rate": n / posted, "posted": posted, "drained": drained, "lost": lost, "refused": len(errors),
            "first p50": statistics.median(first), "last p50": statistics.median(last), "p99": pct(times, 0.99),
            "cpu launcher": cpu["launcher"] / posted, "cpu api workers": cpu["api workers"] / posted,
            "cpu postgres": cpu["postgres"] / posted,
            "cpu bench": (bench1.user + bench1.system - bench0.user - bench0.system) / posted,
            "cpu machine": machine}


def measure(tmp: Path, database: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    agents = [(f"node-{i}", f"127.0.0.{i + 2}", 4) for i in range(4)]
    with database_url(database, tmp) as url, cluster(tmp, url, workers, agents) as c:
        running = to_running(c, args.runs)
        succeeded = to_succeeded(c, args.runs)
        return {"running": running, "succeeded": succeeded,
                "burst": burst(c, args.burst, args.concurrency) if args.burst else {}}


def report(name: str, figures: dict[str, Any]) -> list[str]:
    running, succeeded, b = figures["running"], figures["succeeded"], figures["burst"]
    out = [name, line("  submit -> task RUNNING", running) + "   target p50 <= 100 ms",
           line("  submit -> SUCCEEDED (true)", succeeded) + "   target p50 <= 150 ms"]
    if b:
        out += [f"  burst: {b['rate']:7.1f} submissions/s over {b['posted']:.1f} s (target 500/s), POST p99 "
                f"{b['p99'] * 1000:.0f} ms, {b['refused']:.0f} refused; every job ended after {b['drained']:.1f} s, "
                f"lost {b['lost']:.0f}",
                f"  burst POST p50 first/last 100: {b['first p50'] * 1000:.1f} / {b['last p50'] * 1000:.1f} ms "
                f"({b['last p50'] / b['first p50']:.2f}x, target <= 1.5x)",
                f"  CPU while posting, cores: launcher {b['cpu launcher']:.2f}, "
                f"API workers {b['cpu api workers']:.2f}, postgres (all) {b['cpu postgres']:.2f}, "
                f"bench client {b['cpu bench']:.2f}, machine "
                f"{b['cpu machine']:.2f} of {os.cpu_count()}"]
    return out


def table(results: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """One row per figure, one column per master."""
    width = max(len(name) for name, _ in results) + 2
    rows = [f"{'':<40}" + "".join(f"{name:>{width}}" for name, _ in results)]

    def row(label: str, value: Callable[[dict[str, Any]], str]) -> None:
        rows.append(f"{label:<40}" + "".join(f"{value(f):>{width}}" for _, f in results))

    row("submit -> RUNNING p50 (ms)", lambda f: f"{statistics.median(f['running']) * 1000:.1f}")
    row("submit -> SUCCEEDED p50 (ms)", lambda f: f"{statistics.median(f['succeeded']) * 1000:.1f}")
    if all(f["burst"] for _, f in results):
        row("burst submissions/s", lambda f: f"{f['burst']['rate']:.1f}")
        row("burst POST p50 last/first", lambda f: f"{f['burst']['last p50'] / f['burst']['first p50']:.2f}x")
        row("burst drained (s), lost", lambda f: f"{f['burst']['drained']:.1f}, {f['burst']['lost']:.0f}")
        row("burst CPU launcher/API/pg (cores)", lambda f: f"{f['burst']['cpu launcher']:.2f}/"
            f"{f['burst']['cpu api workers']:.2f}/{f['burst']['cpu postgres']:.2f}")
        row("burst CPU client/machine (cores)", lambda f: f"{f['burst']['cpu bench']:.2f}/"
            f"{f['burst']['cpu machine']:.2f}")
        row("CPU per submission launcher/API/pg (ms)", lambda f: "/".join(
            f"{f['burst'][k] / f['burst']['rate'] * 1000:.1f}" for k in ("cpu launcher", "cpu api workers",
                                                                         "cpu postgres")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="sqlite,postgresql",
                        help="sqlite, postgresql, or both comma-separated (default: both)")
    parser.add_argument("--workers", default="1,2,4", help="PostgreSQL: the API worker counts to run (default 1,2,4)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16, help="the burst's connections (default 16)")
    args = parser.parse_args()
    floor = spawn_floor(args.runs)
    print(line("spawn floor (sh -c true)", floor), flush=True)
    results: list[tuple[str, dict[str, Any]]] = []
    for database, workers in configs(args.database, args.workers):
        with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp:
            figures = measure(Path(tmp), database, workers, args)
        results.append((config_name(database, workers), figures))
        print("\n".join(report(results[-1][0], figures)), flush=True)
    print("\n" + "\n".join(table(results)))


if __name__ == "__main__":
    main()
