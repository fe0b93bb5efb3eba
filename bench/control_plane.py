"""Control-plane benchmark: ``python bench/control_plane.py [--runs N] [--burst N]``.

Side by side, in one run, with the process runtime (a real master and agents on this machine):

  spawn floor             subprocess.Popen of `sh -c true` and its wait: what running the task itself costs
  submit -> RUNNING       a 1-task job (`sleep 30`): from POST /api/v2/jobs until the task's own state is RUNNING
                          in the job detail (polled every 5 ms), heartbeats every 1 s (the default)
  submit -> SUCCEEDED     a 1-task job running `true`, until the job is SUCCEEDED
  burst                   N submissions at concurrency 16 against 4 agents: submissions/s, POST p50 of the first
                          and the last 100, the time until every job has ended; lost jobs are counted

Figures, not assertions. Targets (issue 10): RUNNING p50 <= 100 ms, SUCCEEDED p50 <= 150 ms, burst POST p50 of
the last 100 within 1.5x of the first 100, 0 lost.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import line
from tests.e2e.harness import TERMINAL, Cluster, cluster


def job(name: str, command: str, cpus: int = 1) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": cpus, "memoryMB": 128, "gpuNumber": 0, "command": command}]})


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


def burst(c: Cluster, n: int) -> list[str]:
    def post(i: int) -> tuple[str, float]:
        started = time.perf_counter()
        key = c.submit(job(f"burst-{i}-{time.time_ns()}", "true"))
        return key, time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(post, range(n)))
    posted = time.perf_counter() - started
    keys = [k for k, _ in results]
    lost = 0
    for key in keys:
        try:
            c.wait_state(key, TERMINAL, 600)
        except Exception:
            lost += 1
    drained = time.perf_counter() - started
    first, last = [t for _, t in results[:100]], [t for _, t in results[-100:]]
    return [f"burst of {n} at concurrency 16: {n / posted:8.1f} submissions/s; every job ended after {drained:.1f} s; "
            f"lost {lost}",
            line("  POST, first 100", first), line("  POST, last 100", last),
            f"  {'ratio last/first p50':<26} {statistics.median(last) / statistics.median(first):8.2f}x   "
            f"(target <= 1.5x)"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--database-url", default=None,
                        help="a PostgreSQL URL (an empty database or schema); default: SQLite in a temp directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp_name:
        tmp = Path(tmp_name)
        floor = spawn_floor(args.runs)
        agents = [(f"node-{i}", f"127.0.0.{i + 2}", 4) for i in range(4)]
        with cluster(tmp, args.database_url, agents, master_args=("--heartbeat", "1")) as c:
            running = to_running(c, args.runs)
            succeeded = to_succeeded(c, args.runs)
            burst_lines = burst(c, args.burst) if args.burst else []
        print(line("spawn floor (sh -c true)", floor))
        print(line("submit -> task RUNNING", running) + "   target p50 <= 100 ms")
        print(line("submit -> SUCCEEDED (true)", succeeded) + "   target p50 <= 150 ms")
        for text in burst_lines:
            print(text)


if __name__ == "__main__":
    main()
