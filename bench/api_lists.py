"""API list benchmark: ``python bench/api_lists.py [--database sqlite,postgresql] [--workers 1,2,4] [--jobs N]
[--seconds S] [--burst B]``.

Side by side, in one run, one master after another, each on a fresh database (SQLite in a temporary directory; a
private schema of PostgreSQL's database ``test`` at 127.0.0.1:5432, dropped after): SQLite (``pai master`` as one
process, the embedded baseline) and PostgreSQL with each ``--workers`` count (``pai master`` as the launcher's
process plus gunicorn's arbiter with N API worker processes). For each, N finished 1-task jobs (default 100,000;
100 users, 5 VCs) are stored directly in the database in batches (on PostgreSQL then VACUUM ANALYZE, as autovacuum
would after such a load), then the real ``pai master`` is started on it and measured, one request at a time, each
over up to S seconds (at least 3 and at most 200 requests):

  default list      GET /api/v2/jobs as a client sends it, with no limit (5,000 jobs, OpenPAI's default)
  paged list        limit=20 with withTotalCount, the first page and a deep one (offset 50,000)
  filters           username, vc, state (one, two), keyword (a common word and a rare one that only a full scan
                    finds), each with limit=20 and withTotalCount; and username as a client sends it, no limit
  detail            GET /api/v2/jobs/{user}~{job} of random jobs
  master RSS        the master's own process (the launcher's, on PostgreSQL) now and at its peak (VmRSS, VmHWM),
                    and the processes it started (gunicorn's arbiter and its API workers)

Then, unless ``--burst 0``, the lists under load: a client process of its own GETs the default list and the paged
list (limit 20, withTotalCount) in turn, first for ``--idle-seconds`` (20) with the master otherwise idle (about as
many requests as during a burst of 3,000, so that the two p99s are over like samples), then while B small 1-task
jobs (default 3,000) are POSTed by 16 threads of this process (``--burst-concurrency``), each keeping one
connection; no agent is registered, so the jobs wait, each one a submission the launcher schedules. Printed: both
lists' p50/p99 idle and during the burst, with the ratio of the p99s; the burst's submissions/s and POST p50/p99;
the CPU time during the burst of the launcher's process, the API workers, PostgreSQL's processes (all of this
machine's: shared with whatever else uses the server), this process (the burst's client) and the whole machine. At
the end, a table of every master's main figures.

``--client-nice N`` runs the POSTing threads at nice N (default 0): on a machine this small the burst's client
competes with the master for the CPU, which a deployment's clients, on other machines, do not. A p99 over ~60
samples (a burst of 3,000) is about their slowest, and one slow request moves it from run to run: ``--burst 6000
--idle-seconds 40`` gives ~150 samples a side and a steadier ratio.

A request is timed until its whole body is read. Figures, not assertions. Targets (issue 10): default list
p99 <= 500 ms, paged list and every filter p99 <= 50 ms, detail p99 <= 20 ms, master RSS <= 500 MB; during a
burst of submissions, the list p99 <= 2x idle.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
from sqlalchemy import insert, text

from bench.figures import pct
from bench.master import (
    config_name,
    configs,
    cpu_by_role,
    cpu_delta,
    machine_busy,
    master_process,
    memory,
    rss_mb,
    started_rss_mb,
    wait_healthy,
)
from pai.domain.job import Job, Task, initial_tasks
from pai.domain.jobspec import ElasticRange, JobSpec, TaskRoleSpec
from pai.domain.resources import Resources
from pai.domain.states import JobState, TaskState
from pai.store import jobs as store_jobs
from pai.store import keyword
from pai.store.db import Database
from pai.store.schema import JobRow, TaskRow
from tests.dbkit import database_url

PASSWORD = "bench-password"
AGENT_TOKEN = "bench-agent-token"
MASTER_ENV = {"PAI_ADMIN_PASSWORD": PASSWORD, "PAI_AGENT_TOKEN": AGENT_TOKEN, "PAI_LOG_LEVEL": "WARNING"}
USERS = [f"user-{i:03d}" for i in range(100)]
VCS = ["default", "dev", "prod", "research", "batch"]
WORDS = ["train", "eval", "infer", "sweep"]
ENDINGS = [(JobState.SUCCEEDED, TaskState.SUCCEEDED, 0), (JobState.FAILED, TaskState.FAILED, 1),
           (JobState.STOPPED, TaskState.STOPPED, 143)]
BATCH = 2_000
T0 = 1_700_000_000.0


def finished_job(i: int, rng: random.Random, elastic: bool = False) -> tuple[Job, str]:
    """A finished 1-task job; ``elastic``: its role asks 2 instances, stretches 1..4 and ran at 3 (a task row more
    than it asked: the list counts its task rows, pai.store.summaries)."""
    user, vc, word = rng.choice(USERS), rng.choice(VCS), rng.choice(WORDS)
    name = f"{word}-{i:06d}"
    role = TaskRoleSpec("worker", 2 if elastic else 1, "python train.py --epochs 10 --lr 0.001",
                        Resources(1, 4, 8192), image="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
                        elastic=ElasticRange(1, 4) if elastic else None)
    spec = JobSpec(name=name, task_roles=(role,), virtual_cluster=vc, image=role.image)
    state, task_state, code = ENDINGS[i % 3] if i % 10 else ENDINGS[0]
    submitted = T0 + i * 30.0
    grown = (Task(role="worker", index=2),) if elastic else ()
    tasks = tuple(replace(t, state=task_state, node=f"node-{i % 500:03d}", address="10.0.0.1", attempt_id=f"a-{i}",
                          exit_code=code, started_at=submitted + 5, finished_at=submitted + 600)
                  for t in initial_tasks(spec) + grown)
    job = Job(id=f"{i:032x}", user=user, spec=spec, state=state, submitted_at=submitted, started_at=submitted + 5,
              completed_at=submitted + 600, exit_code=code, tasks=tasks)
    text = (f"protocolVersion: 2\nname: {name}\ntype: job\ndefaults: {{virtualCluster: {vc}}}\n"
            f"prerequisites:\n  - {{type: dockerimage, name: img, uri: '{role.image}'}}\n"
            f"taskRoles:\n  worker:\n    instances: {role.instances}\n    dockerImage: img\n"
            "    resourcePerInstance: {gpu: 1, cpu: 4, memoryMB: 8192}\n"
            f"    commands: ['{role.command}']\n"
            + ("extras: {elastic: {worker: {minInstances: 1, maxInstances: 4}}}\n" if elastic else ""))
    return job, text


def job_rows(job: Job, text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The rows ``store.jobs.insert_job`` writes, as plain dicts for one bulk INSERT a batch (it takes ~1 ms a job,
    a savepoint each: minutes for 100,000)."""
    return store_jobs.rows_of(job, text)


def store(url: str, n: int, elastic_share: float = 0.0) -> tuple[float, list[str]]:
    """Insert ``n`` finished jobs in batches (``elastic_share`` of them elastic, ``finished_job``); returns the
    seconds it took and a sample of job keys."""
    rng = random.Random(10)
    erng = random.Random(11)  # its own draws: the jobs are the same whatever the share
    db = Database(url)
    db.migrate()
    started = time.perf_counter()
    keys: list[str] = []
    for first in range(0, n, BATCH):
        batch = [finished_job(i, rng, erng.random() < elastic_share) for i in range(first, min(n, first + BATCH))]
        rows = [job_rows(job, text) for job, text in batch]
        with db.session() as s:
            s.execute(insert(JobRow), [job for job, _ in rows])
            s.execute(insert(TaskRow), [task for _, tasks in rows for task in tasks])
        keys.extend(job.key for job, _ in batch[:: max(1, BATCH // 20)])
    with db.session() as s:  # the store's own reader agrees with what was written
        assert store_jobs.get_job(s, batch[-1][0].key) == batch[-1][0]
        keyword.rebuild(s.connection())  # the rows went in around insert_job: index their names
    if db.dialect == "postgresql":  # what autovacuum does after a load this size: statistics, visibility map
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(text(f"VACUUM ANALYZE jobs, tasks, {keyword.TABLE}"))
    db.dispose()
    return time.perf_counter() - started, keys


def figure(name: str, values: list[float], note: str) -> str:
    return (f"{name:<30} p50 {statistics.median(values) * 1000:8.1f} ms   p99 {pct(values, 0.99) * 1000:8.1f} ms"
            f"   (n={len(values)}; {note})")


async def measure(http: aiohttp.ClientSession, base: str, paths: list[str], seconds: float) -> tuple[list[float], str]:
    """Time GETs of ``paths`` in turn for up to ``seconds`` (3 to 200 requests); the note says what the first
    answer held."""
    times: list[float] = []
    note = ""
    deadline = time.perf_counter() + seconds
    while len(times) < 3 or (len(times) < 200 and time.perf_counter() < deadline):
        path = paths[len(times) % len(paths)]
        started = time.perf_counter()
        async with http.get(base + path) as resp:
            body = await resp.read()
        times.append(time.perf_counter() - started)
        if not note:
            if resp.status != 200:
                raise SystemExit(f"GET {path}: {resp.status} {body[:300]!r}")
            answer = json.loads(body)
            paged = isinstance(answer, dict) and "totalCount" in answer
            items = answer["data"] if paged else answer
            total = f", totalCount {answer['totalCount']}" if paged else ""
            count = f"{len(items)} items" if isinstance(items, list) else "1 job"
            note = f"{count}{total}, {len(body) / 1e6:.2f} MB"
    return times, note


async def client(base: str, pid: int, keys: list[str], seconds: float, jobs: int) -> tuple[str, dict[str, Any]]:
    """The idle figures, printed; returns the admin's token and the times of each case, by name."""
    login = {"username": "admin", "password": PASSWORD}
    async with aiohttp.ClientSession() as http, http.post(base + "/api/v2/authn/basic/login", json=login) as r:
        token = (await r.json())["token"]
    print(f"{'master RSS after start':<30} {memory(pid)}")
    page = "limit=20&withTotalCount=true"
    cases = [
        ("default list", ["/api/v2/jobs"]),
        ("paged list (limit 20)", [f"/api/v2/jobs?{page}"]),
        ("deep page (offset 50,000)", [f"/api/v2/jobs?{page}&offset={min(50_000, jobs // 2)}"]),
        ("filter username", [f"/api/v2/jobs?{page}&username={u}" for u in USERS[:10]]),
        ("filter username, no limit", [f"/api/v2/jobs?username={u}" for u in USERS[10:20]]),
        ("filter vc", [f"/api/v2/jobs?{page}&vc={vc}" for vc in VCS]),
        ("filter state", [f"/api/v2/jobs?{page}&state={st}" for st in ("FAILED", "STOPPED", "SUCCEEDED")]),
        ("filter state (two states)", [f"/api/v2/jobs?{page}&state=FAILED,STOPPED"]),
        ("filter state (none match)", [f"/api/v2/jobs?{page}&state=RUNNING"]),
        ("filter keyword (common)", [f"/api/v2/jobs?{page}&keyword={w}" for w in WORDS]),
        ("filter keyword (rare)", [f"/api/v2/jobs?{page}&keyword={i:06d}" for i in range(7, jobs, max(1, jobs // 7))]),
        ("job detail", [f"/api/v2/jobs/{key}" for key in keys]),
    ]
    headers = {"Authorization": f"Bearer {token}"}
    figures: dict[str, Any] = {}
    async with aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=600)) as http:
        for name, paths in cases:
            figures[name], note = await measure(http, base, paths, seconds)
            print(figure(name, figures[name], note), flush=True)
    print(f"{'master RSS at the end / peak':<30} {memory(pid)}")
    figures["rss"], figures["rss started"] = rss_mb(pid)[0], sum(started_rss_mb(pid))
    return str(token), figures


class Connection:
    """One keep-alive HTTP connection to the master, for one thread."""

    def __init__(self, base: str, token: str) -> None:
        host, port = base.removeprefix("http://").rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=600)
        self.headers = {"Authorization": f"Bearer {token}"}

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        headers = {**self.headers, "Content-Type": "application/json"} if body is not None else self.headers
        self.conn.request(method, path, body=body, headers=headers)
        resp = self.conn.getresponse()
        return resp.status, resp.read()

    def close(self) -> None:
        self.conn.close()


LOADED_CASES = [("default list", "/api/v2/jobs"),
                ("paged list (limit 20)", "/api/v2/jobs?limit=20&withTotalCount=true")]


def lists_until(base: str, token: str, done: Any) -> dict[str, list[float]]:
    """GET the LOADED_CASES in turn until ``done`` (an Event) is set (each at least 3 times); their times, by
    name."""
    conn = Connection(base, token)
    times: dict[str, list[float]] = {name: [] for name, _ in LOADED_CASES}
    try:
        while not done.is_set() or min(len(v) for v in times.values()) < 3:
            for name, path in LOADED_CASES:
                started = time.perf_counter()
                status, body = conn.request("GET", path)
                times[name].append(time.perf_counter() - started)
                if status != 200:
                    raise SystemExit(f"GET {path}: {status} {body[:300]!r}")
    finally:
        conn.close()
    return times


def lists_in_a_process(base: str, token: str, done: Any, out: Any) -> None:
    out.put(lists_until(base, token, done))


def lists_beside(base: str, token: str, run: Callable[[], None]) -> dict[str, list[float]]:
    """The LOADED_CASES' times while ``run()`` runs, from a process of their own: a client of the lists is not
    the client submitting the burst, and would otherwise wait for the GIL of the 16 posting threads here."""
    ctx = multiprocessing.get_context("spawn")
    done, out = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=lists_in_a_process, args=(base, token, done, out))
    proc.start()
    try:
        run()
    finally:
        done.set()
    times: dict[str, list[float]] = out.get()
    proc.join(30)
    return times


def p50_p99(values: list[float]) -> str:
    return (f"p50 {statistics.median(values) * 1000:7.1f} ms  p99 {pct(values, 0.99) * 1000:7.1f} ms "
            f"(n={len(values)})")


def burst_job(i: int, stamp: int) -> bytes:
    return json.dumps({"jobName": f"burst-{stamp}-{i}", "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "true"}]}).encode()


def under_burst(base: str, pid: int, token: str, idle_seconds: float, burst: int, concurrency: int,
                client_nice: int = 0) -> dict[str, Any]:
    """The lists' p50/p99 idle for ``idle_seconds``, then while ``burst`` submissions run at ``concurrency``, printed
    and returned. The idle window should hold about as many requests as the burst's: a p99 over 9 samples is their
    largest, over 50 nearly so, and comparing the two would measure the sample sizes, not the burst."""
    idle = lists_beside(base, token, lambda: time.sleep(idle_seconds))

    local = threading.local()
    connections: list[Connection] = []
    stamp = time.time_ns()

    def post(i: int) -> tuple[float, str | None]:
        if not hasattr(local, "conn"):
            local.conn = Connection(base, token)
            connections.append(local.conn)
        started = time.perf_counter()
        status, body = local.conn.request("POST", "/api/v2/jobs", burst_job(i, stamp))
        took = time.perf_counter() - started
        return took, None if status < 300 else f"HTTP {status} {body[:120]!r}"

    results: list[tuple[float, str | None]] = []

    def post_all() -> None:
        # nice is per thread on Linux: each poster lowers its own
        with ThreadPoolExecutor(concurrency, initializer=os.nice, initargs=(client_nice,)) as posters:
            results.extend(posters.map(post, range(burst)))

    cpu_before, machine_before, bench_before = cpu_by_role(pid), machine_busy(), os.times()
    started = time.perf_counter()
    loaded = lists_beside(base, token, post_all)
    posted = time.perf_counter() - started
    cpu, machine_after, bench_after = cpu_delta(cpu_before, cpu_by_role(pid)), machine_busy(), os.times()
    cpu["bench client"] = bench_after.user + bench_after.system - bench_before.user - bench_before.system
    cpu["machine"] = ((machine_after[0] - machine_before[0]) / max(1, machine_after[1] - machine_before[1])
                      * (os.cpu_count() or 1) * posted)
    for conn in connections:
        conn.close()

    post_times = [t for t, err in results if err is None]
    errors = [err for _, err in results if err is not None]
    out: dict[str, Any] = {"rate": len(post_times) / posted, "post": post_times, "idle": idle, "loaded": loaded,
                           "cpu": {name: used / posted for name, used in cpu.items()}}
    print(f"\nunder a burst of {burst:,} submissions at concurrency {concurrency} (client nice {client_nice}): "
          f"{out['rate']:.1f} submissions/s over {posted:.1f} s, {len(errors)} refused"
          f"{f' (first: {errors[0]})' if errors else ''}")
    if post_times:
        print(figure("  POST /api/v2/jobs", post_times, "during the burst"))
    for name, _ in LOADED_CASES:
        a, b = idle[name], loaded[name]
        print(f"{name:<30} idle {p50_p99(a)}   burst {p50_p99(b)}   p99 ratio {pct(b, 0.99) / pct(a, 0.99):5.2f}x"
              "  (target <= 2x)")
    print(f"{'CPU during the burst':<30} " + ", ".join(f"{name} {used:.1f} s" for name, used in cpu.items())
          + f" (of {posted:.1f} s; postgres: all of this machine's server processes)")
    print(f"{'master RSS after the burst / peak':<30} {memory(pid)}")
    return out


def ms(values: list[float], q: float) -> str:
    return f"{(statistics.median(values) if q == 0.5 else pct(values, q)) * 1000:.1f}"


def ratio(burst: dict[str, Any], name: str) -> float:
    """The p99 of ``name`` during the burst over its p99 idle."""
    return pct(burst["loaded"][name], 0.99) / pct(burst["idle"][name], 0.99)


def table(results: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """One row per figure, one column per master."""
    width = max(len(name) for name, _ in results) + 2
    rows = [f"{'':<40}" + "".join(f"{name:>{width}}" for name, _ in results)]

    def row(label: str, value: Callable[[dict[str, Any]], str]) -> None:
        rows.append(f"{label:<40}" + "".join(f"{value(f):>{width}}" for _, f in results))

    row("default list p50 / p99 (ms)", lambda f: f"{ms(f['idle']['default list'], 0.5)} / "
        f"{ms(f['idle']['default list'], 0.99)}")
    row("paged list p50 / p99 (ms)", lambda f: f"{ms(f['idle']['paged list (limit 20)'], 0.5)} / "
        f"{ms(f['idle']['paged list (limit 20)'], 0.99)}")
    row("job detail p99 (ms)", lambda f: ms(f["idle"]["job detail"], 0.99))
    row("RSS: master's process / others (MB)", lambda f: f"{f['idle']['rss']:.0f} / {f['idle']['rss started']:.0f}")
    if all(f["burst"] for _, f in results):
        for name, _ in LOADED_CASES:
            row(f"{name.split(' (')[0]} p99 idle -> burst (ms)",
                lambda f, n=name: f"{ms(f['burst']['idle'][n], 0.99)} -> {ms(f['burst']['loaded'][n], 0.99)}")
            row("  ratio (target <= 2x)", lambda f, n=name: f"{ratio(f['burst'], n):.2f}x")
        row("burst submissions/s", lambda f: f"{f['burst']['rate']:.1f}")
        row("burst POST p50 / p99 (ms)", lambda f: f"{ms(f['burst']['post'], 0.5)} / "
            f"{ms(f['burst']['post'], 0.99)}")
        row("burst CPU launcher/API/pg (cores)", lambda f: "/".join(
            f"{f['burst']['cpu'][k]:.2f}" for k in ("launcher", "api workers", "postgres")))
        row("burst CPU client/machine (cores)", lambda f: "/".join(
            f"{f['burst']['cpu'][k]:.2f}" for k in ("bench client", "machine")))
        row("CPU per submission launcher/API/pg (ms)", lambda f: "/".join(
            f"{f['burst']['cpu'][k] / f['burst']['rate'] * 1000:.1f}" for k in ("launcher", "api workers", "postgres")))
    return rows


def run(tmp: Path, database: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    with database_url(database, tmp) as url:
        took, keys = store(url, args.jobs)
        print(f"\n{config_name(database, workers)}: stored {args.jobs:,} finished jobs in {took:.1f} s", flush=True)
        with master_process(tmp, url, workers, MASTER_ENV) as master:
            pid = master.proc.pid
            asyncio.run(wait_healthy(master.url, master.proc, master.log))
            token, idle = asyncio.run(client(master.url, pid, keys, args.seconds, args.jobs))
            burst = under_burst(master.url, pid, token, args.idle_seconds, args.burst, args.burst_concurrency,
                                args.client_nice) if args.burst > 0 else {}
            if master.proc.poll() is not None:
                raise SystemExit(f"the master exited {master.proc.returncode}:\n{master.log.read_text()[-3000:]}")
    return {"idle": idle, "burst": burst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="sqlite,postgresql",
                        help="sqlite, postgresql, or both comma-separated (default: both)")
    parser.add_argument("--workers", default="1,2,4", help="PostgreSQL: the API worker counts to run (default 1,2,4)")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10.0, help="time spent on each measurement (default 10)")
    parser.add_argument("--burst", type=int, default=3000,
                        help="submissions of the burst the lists are measured under (default 3,000; 0: skip it)")
    parser.add_argument("--burst-concurrency", type=int, default=16, help="threads POSTing the burst (default 16)")
    parser.add_argument("--idle-seconds", type=float, default=20.0,
                        help="how long the lists are measured idle before the burst (default 20, about as long as "
                             "a burst of 3,000 takes, so that both p99s are over as many requests)")
    parser.add_argument("--client-nice", type=int, default=0,
                        help="nice value of the threads POSTing the burst (default 0; see above)")
    args = parser.parse_args()
    results: list[tuple[str, dict[str, Any]]] = []
    for database, workers in configs(args.database, args.workers):
        with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp:
            results.append((config_name(database, workers), run(Path(tmp), database, workers, args)))
    print("\n" + "\n".join(table(results)))


if __name__ == "__main__":
    main()
