"""Heartbeat benchmark: ``python bench/heartbeats.py [--database sqlite,postgresql] [--workers W] [--agents N]
[--tasks T] [--seconds S]``.

N simulated agents (default 1,000) heartbeating every second against one master with T running tasks (default
10,000): the CPU use of the launcher's process and the heartbeat p99.

The master is the real one, ``python -m pai master`` in a subprocess, one after another for each ``--database``:
SQLite in a temporary data directory (one process: the launcher, the users' API and the agents' endpoints), and
PostgreSQL (a private schema of the database ``test`` at 127.0.0.1:5432, dropped after), where ``pai master`` is the
launcher's process (the agents' endpoints, the elected scheduling loop) plus gunicorn's arbiter with W API workers
(default 2): the simulated agents are given the launcher's port, as a real agent given the API's URL is sent there
(NotLeaderError), and the jobs are submitted and checked through the API workers. The agents are simulated in this
process (asyncio, one aiohttp client session with a connection limit, ``--connections``), and speak the agent
protocol over HTTP with the messages of pai.protocol, as pai.nodeagent does: each registers (C CPUs, no GPU; C =
ceil(T / N) unless ``--cpus``), then heartbeats once a second, the agents' slots spread evenly over the second. A
start command in a reply becomes a RUNNING container report in the agent's following heartbeats, a stop an exited
one; no process is run. The agent channel (a WebSocket over which the master pokes) is not opened: commands come
with the next heartbeat, as for an agent without one.

Setup: submit T 1-CPU tasks as T/k jobs of k tasks (``--tasks-per-job``, default 1) at concurrency 16 while no
agent is registered (they wait), register the N agents (concurrency 50) and start their heartbeats, wait until
the job list shows every job RUNNING (admitted) and every task's RUNNING report was answered by the master (it
applies a report before it replies), check that in the job details of a sample of the jobs (``--check``), let
it settle (``--warmup``), then measure for S seconds:

  heartbeats/s        achieved, against the N/s scheduled
  heartbeat latency   p50 p95 p99 max, from the request sent until its reply is read and decoded; the wait for a
                      free connection of the client pool is not in it (its own line; both lines together: what an
                      agent would see)
  launcher CPU        utime + stime of the master's own process over the window (/proc/<pid>/stat), % of one core:
                      the launcher's process on PostgreSQL, the whole master on SQLite (target <= 50 %)
  API workers CPU     the same for gunicorn's API workers (PostgreSQL), and PostgreSQL's server processes (all of
                      this machine's: shared with whatever else uses the server)
  bench CPU           this process's (the load generator), same unit: on a machine with few cores all compete
  machine CPU         all cores busy over the window (/proc/stat), % of the machine
  master RSS          the master's own process now and at its peak (VmRSS, VmHWM)

Figures, not assertions. At the end of each, the master's log lines at WARNING or above are counted and a few
shown; after all, a table of each master's main figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from bench.figures import line, pct
from bench.master import (
    Master,
    config_name,
    configs,
    cpu_by_role,
    cpu_delta,
    machine_busy,
    master_process,
    rss_mb,
    wait_healthy,
)
from pai.domain.resources import Resources
from pai.protocol import (
    ContainerReport,
    ContainerStatus,
    HeartbeatRequest,
    MasterReply,
    NodeInfo,
    RegisterRequest,
    StartTask,
    StopTask,
)
from tests.dbkit import database_url

ADMIN_PASSWORD = "bench-secret-password"
AGENT_TOKEN = "bench-agent-token"
BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 0.5, 30.0  # the real agent's, after a failed register or heartbeat
EXITED_KEPT_SECONDS = 60.0  # an exited attempt is reported this long, then forgotten (the supervisor's expiry)


# ---- the simulated agents ------------------------------------------------------------------------------------


@dataclass
class Stats:
    """What the heartbeats did; ``window`` (perf_counter start, end) selects the samples that are kept."""

    window: tuple[float, float] | None = None
    latency: list[float] = field(default_factory=list)  # sent -> reply decoded, connection-pool wait excluded
    queued: list[float] = field(default_factory=list)  # the wait for a free connection of the pool
    ok_in_window: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    errors_in_window: Counter[str] = field(default_factory=Counter)
    missed_slots: int = 0  # a heartbeat due while the previous one was still going (or the loop lagged)
    missed_in_window: int = 0

    def in_window(self, t: float) -> bool:
        return self.window is not None and self.window[0] <= t < self.window[1]


@dataclass
class SimAgent:
    name: str
    index: int
    cpus: int
    running: dict[str, ContainerReport] = field(default_factory=dict)
    exited: dict[str, tuple[ContainerReport, float]] = field(default_factory=dict)  # attempt -> (report, forget at)
    registered: bool = False
    wake: bool = False  # an attempt started or ended: the real agent heartbeats at once
    backoff: float = BACKOFF_SECONDS
    node_timeout: float = 30.0  # the master's, from its last reply
    acked: set[str] = field(default_factory=set)  # attempts reported RUNNING in a request the master answered 200
    starts: int = 0
    stops: int = 0

    def node(self) -> NodeInfo:
        address = f"10.{self.index // 65536 % 256}.{self.index // 256 % 256}.{self.index % 256}"
        return NodeInfo(self.name, address, Resources(gpu=0, cpu=self.cpus, memory_mb=self.cpus * 1024))

    def reports(self) -> tuple[ContainerReport, ...]:
        now = time.time()
        for attempt in [a for a, (_, until) in self.exited.items() if until < now]:
            del self.exited[attempt]
        return (*self.running.values(), *(r for r, _ in self.exited.values()))

    def apply(self, reply: MasterReply) -> None:
        now = time.time()
        self.node_timeout = reply.node_timeout_seconds
        started, stopped = self.starts, self.stops
        for command in reply.commands:
            if isinstance(command, StartTask):
                if command.attempt_id not in self.running and command.attempt_id not in self.exited:
                    self.running[command.attempt_id] = ContainerReport(
                        command.attempt_id, command.job_key, command.role, command.index, ContainerStatus.RUNNING,
                        started_at=now)
                    self.starts += 1
            elif isinstance(command, StopTask):
                report = self.running.pop(command.attempt_id, None)
                if report is not None:
                    self.stops += 1
                    done = replace(report, status=ContainerStatus.EXITED, exit_code=command.exit_code,
                                   reason=command.reason, finished_at=now)
                    self.exited[command.attempt_id] = (done, now + EXITED_KEPT_SECONDS)
        self.wake = self.wake or (self.starts, self.stops) != (started, stopped)

    def running_known(self) -> int:
        """How many of this agent's RUNNING attempts the master has been told of (and answered)."""
        return len(self.acked & self.running.keys())

    def message(self) -> tuple[str, dict[str, Any], list[str]]:
        """The next request: a register until the master accepted one (or after an error), else a heartbeat;
        and the attempts it reports RUNNING."""
        reports = self.reports()
        running = [r.attempt_id for r in reports if r.status is ContainerStatus.RUNNING]
        if not self.registered:
            return "/api/internal/agents/register", RegisterRequest(self.node(), reports).to_dict(), running
        path = f"/api/internal/agents/{quote(self.name, safe='')}/heartbeat"
        return path, HeartbeatRequest(self.name, reports).to_dict(), running


async def _queued_start(_s: Any, ctx: SimpleNamespace, _p: Any) -> None:
    if isinstance(ctx.trace_request_ctx, dict):
        ctx.trace_request_ctx["queued_from"] = time.perf_counter()


async def _queued_end(_s: Any, ctx: SimpleNamespace, _p: Any) -> None:
    d = ctx.trace_request_ctx
    if isinstance(d, dict) and "queued_from" in d:
        d["queued"] = d.get("queued", 0.0) + time.perf_counter() - d["queued_from"]


def agent_session(connections: int) -> aiohttp.ClientSession:
    trace = aiohttp.TraceConfig()
    trace.on_connection_queued_start.append(_queued_start)
    trace.on_connection_queued_end.append(_queued_end)
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections), trace_configs=[trace],
        headers={"Authorization": f"Bearer {AGENT_TOKEN}", "Content-Type": "application/json"},
        timeout=aiohttp.ClientTimeout(total=10))


async def exchange(http: aiohttp.ClientSession, base: str, agent: SimAgent, stats: Stats) -> float | None:
    """One register or heartbeat of ``agent``; its latency (pool wait excluded), None when it failed."""
    path, body, running = agent.message()
    was_heartbeat = agent.registered
    ctx: dict[str, float] = {}
    started = time.perf_counter()
    try:
        async with http.post(base + path, data=json.dumps(body).encode(), trace_request_ctx=ctx) as resp:
            data = await resp.read()
            if resp.status != 200:
                try:
                    code = str(json.loads(data).get("code"))
                except (ValueError, AttributeError):
                    code = data[:80].decode(errors="replace")
                raise RuntimeError(f"HTTP {resp.status} {code}")
            reply = MasterReply.from_dict(json.loads(data))
    except Exception as e:  # counted; the agent registers again, as the real one does
        kind = str(e) if isinstance(e, RuntimeError) else type(e).__name__
        kind = f"{'heartbeat' if was_heartbeat else 'register'}: {kind}"
        stats.errors[kind] += 1
        if stats.in_window(started):
            stats.errors_in_window[kind] += 1
        agent.registered = False
        return None
    ended = time.perf_counter()
    agent.registered = True
    agent.acked.update(running)
    agent.apply(reply)
    queued = ctx.get("queued", 0.0)
    if was_heartbeat and stats.in_window(started):
        stats.latency.append(ended - started - queued)
        stats.queued.append(queued)
        stats.ok_in_window += 1
    return ended - started - queued


async def heartbeat_loop(http: aiohttp.ClientSession, base: str, agent: SimAgent, n: int, t0: float,
                         stats: Stats, stop: asyncio.Event) -> None:
    """Heartbeat once a second in this agent's slot (``index / n`` into the second); a slot missed because the
    previous heartbeat was still going is skipped, not made up with a burst. As the real agent: a heartbeat at
    once after a reply that started or stopped an attempt; after a failure, a pause (0.5 s, doubled each time,
    at most 30 s or a fifth of the node timeout), then a register."""
    rng = random.Random(agent.index)
    next_at = t0 + agent.index / n
    while not stop.is_set():
        delay = next_at - time.perf_counter()
        if delay > 0 and not agent.wake:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
                return
        agent.wake = False
        in_slot = time.perf_counter() >= next_at
        ok = await exchange(http, base, agent, stats) is not None
        if ok:
            agent.backoff = BACKOFF_SECONDS
        else:
            pause = agent.backoff * rng.uniform(0.8, 1.2)
            agent.backoff = min(agent.backoff * 2, MAX_BACKOFF_SECONDS, agent.node_timeout / 5)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), pause)
                return
            agent.wake = True  # register now
        if in_slot:
            next_at += 1.0
        now = time.perf_counter()
        if next_at < now:
            missed = math.ceil(now - next_at)
            if ok:
                stats.missed_slots += missed
                if stats.in_window(now):
                    stats.missed_in_window += missed
            next_at += missed


# ---- the master ----------------------------------------------------------------------------------------------


def log_problems(log: Path) -> list[str]:
    lines = log.read_text(errors="replace").splitlines()
    bad = [ln for ln in lines if any(w in ln for w in ("WARNING", "ERROR", "CRITICAL", "Traceback"))]
    if not bad:
        return [f"master log: {len(lines)} lines, none at WARNING or above"]
    kinds: Counter[str] = Counter()
    example: dict[str, str] = {}
    for ln in bad:  # "<time> <LEVEL> <logger> <message> key=value ...": counted by level, logger and message
        parts = ln.split(" ", 3)
        words = parts[3].split() if len(parts) == 4 else []
        kind = " ".join(parts[1:3] + [w for w in words[: next((i for i, w in enumerate(words) if "=" in w),
                                                            len(words))]]) if words else ln[:100]
        kinds[kind] += 1
        example.setdefault(kind, ln)
    out = [f"master log: {len(lines)} lines, {len(bad)} at WARNING or above; by kind:"]
    for kind, count in kinds.most_common(8):
        out.append(f"  {count:6d} x {kind}   e.g. {example[kind][:160]}")
    return out


# ---- the run -------------------------------------------------------------------------------------------------


def job_body(name: str, tasks: int) -> bytes:
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": tasks, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0,
         "command": "sleep infinity"}]}).encode()


async def submit_all(api: aiohttp.ClientSession, base: str, jobs: int, per_job: int,
                     concurrency: int) -> tuple[list[float], Counter[str]]:
    times: list[float] = []
    errors: Counter[str] = Counter()
    queue = iter(range(jobs))
    stamp = time.time_ns()

    async def worker() -> None:
        for i in queue:
            started = time.perf_counter()
            try:
                async with api.post(base + "/api/v2/jobs", data=job_body(f"hb-{stamp}-{i}", per_job),
                                    headers={"Content-Type": "application/json"}) as resp:
                    body = await resp.read()
                    if resp.status >= 300:
                        errors[f"HTTP {resp.status} {body[:100]!r}"] += 1
                        continue
            except (aiohttp.ClientError, TimeoutError) as e:
                errors[type(e).__name__] += 1
                continue
            times.append(time.perf_counter() - started)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return times, errors


async def running_jobs(api: aiohttp.ClientSession, base: str) -> int:
    async with api.get(base + "/api/v2/jobs?state=RUNNING&limit=1&withTotalCount=true") as resp:
        return int((await resp.json())["totalCount"])


async def tasks_running(api: aiohttp.ClientSession, base: str, agents: list[SimAgent],
                        sample: int) -> tuple[int, int, int]:
    """Check with the API: the job details of ``sample`` random jobs whose tasks the agents run; (jobs, tasks
    looked at, tasks RUNNING)."""
    keys = sorted({r.job_key for a in agents for r in a.running.values()})
    keys = random.Random(1).sample(keys, min(sample, len(keys)))
    seen = running = 0
    for key in keys:
        async with api.get(f"{base}/api/v2/jobs/{quote(key, safe='~')}") as resp:
            detail = await resp.json()
        for info in detail["taskRoles"].values():
            for task in info["taskStatuses"]:
                seen += 1
                running += task["taskState"] == "RUNNING"
    return len(keys), seen, running


def pct_line(name: str, values: list[float]) -> str:
    if not values:
        return f"{name:<28} (no samples)"
    return (line(name, values) + f"   p99 {pct(values, 0.99) * 1000:8.1f} ms   max {max(values) * 1000:8.1f} ms")


async def run(args: argparse.Namespace, master: Master) -> dict[str, float]:
    """Set up, measure, print; the main figures for the table."""
    base, launcher = master.url, master.launcher_url
    setup_started = time.perf_counter()
    await wait_healthy(base, master.proc, master.log)
    print(f"{'master up':<28} {time.perf_counter() - setup_started:8.1f} s", flush=True)
    login = {"username": "admin", "password": ADMIN_PASSWORD}
    async with aiohttp.ClientSession() as http, http.post(base + "/api/v2/authn/basic/login", json=login) as resp:
        token = (await resp.json())["token"]

    per_job = args.tasks_per_job
    jobs = math.ceil(args.tasks / per_job)
    tasks = jobs * per_job
    cpus = args.cpus or math.ceil(tasks / args.agents)
    agents = [SimAgent(f"sim-{i:05d}", i, cpus) for i in range(args.agents)]
    stats = Stats()
    stop = asyncio.Event()
    api = aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"},
                                timeout=aiohttp.ClientTimeout(total=600))
    http = agent_session(args.connections)
    loops: list[asyncio.Task[None]] = []
    try:
        # Submit every job first, no agent registered yet: the jobs wait (and no node can be lost meanwhile).
        started = time.perf_counter()
        times, errors = await submit_all(api, base, jobs, per_job, args.submit_concurrency)
        took = time.perf_counter() - started
        print(f"submitted {len(times):,} of {jobs:,} jobs of {per_job} task(s) in {took:.1f} s "
              f"({len(times) / took:.1f} jobs/s, concurrency {args.submit_concurrency}, no agent yet)", flush=True)
        if times:
            print(line("  POST /api/v2/jobs", times), flush=True)
        for text, count in errors.most_common(5):
            print(f"  {count} x {text}", flush=True)

        # Register every agent (concurrency 50), then keep them all heartbeating from here on.
        started = time.perf_counter()
        sem = asyncio.Semaphore(50)

        async def register(agent: SimAgent) -> float | None:
            async with sem:
                return await exchange(http, launcher, agent, stats)

        reg = await asyncio.gather(*(register(a) for a in agents))
        took = time.perf_counter() - started
        reg_times = [t for t in reg if t is not None]
        print(f"registered {len(reg_times):,} of {len(agents):,} agents ({cpus} CPUs each) in {took:.1f} s", flush=True)
        if reg_times:
            print(line("  register", reg_times), flush=True)
        t0 = time.perf_counter() + 0.5
        loops = [asyncio.create_task(heartbeat_loop(http, launcher, a, len(agents), t0, stats, stop)) for a in agents]

        # Until the master admitted every job and has heard of every task RUNNING (a heartbeat reporting it was
        # answered: the master applies a report before it replies).
        started = time.perf_counter()
        last_print = started
        admitted = known = 0
        while time.perf_counter() - started < args.wait:
            admitted = await running_jobs(api, base)
            known = sum(a.running_known() for a in agents)
            if admitted >= len(times) and known >= len(times) * per_job:
                break
            if time.perf_counter() - last_print >= 10:
                last_print = time.perf_counter()
                told = sum(len(a.running) for a in agents)
                failed = ", ".join(f"{c} x {k}" for k, c in stats.errors.most_common(3)) or "none"
                print(f"  ... {admitted:,} jobs admitted (RUNNING in the list), {told:,} tasks started by the agents, "
                      f"{known:,} of them reported to the master; failed requests so far: {failed}", flush=True)
            await asyncio.sleep(1)
        print(f"{admitted:,} of {len(times):,} jobs admitted, {known:,} tasks RUNNING reported to the master, "
              f"{time.perf_counter() - started:.1f} s after the agents registered", flush=True)
        checked, seen, in_api = await tasks_running(api, base, agents, args.check)
        print(f"  API check, the details of {checked:,} random jobs: {in_api:,} of their {seen:,} tasks RUNNING",
              flush=True)
        print(f"{'setup took':<28} {time.perf_counter() - setup_started:8.1f} s", flush=True)
        await asyncio.sleep(args.warmup)

        # The measurement window.
        pid = master.proc.pid
        bench0, master0, machine0 = os.times(), cpu_by_role(pid), machine_busy()
        w0 = time.perf_counter()
        stats.window = (w0, w0 + args.seconds)
        await asyncio.sleep(args.seconds)
        bench1, master1, machine1 = os.times(), cpu_by_role(pid), machine_busy()
        wall = time.perf_counter() - w0
        now_rss, peak_rss = rss_mb(pid)
        stop.set()
        await asyncio.gather(*loops)
    finally:
        stop.set()
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        await http.close()
        await api.close()

    cpu = {name: used / wall * 100 for name, used in cpu_delta(master0, master1).items()}
    bench_cpu = (bench1.user + bench1.system - bench0.user - bench0.system) / wall * 100
    machine_cpu = (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]) * 100
    reported = sum(len(a.running) for a in agents)
    print()
    print(f"window: {wall:.1f} s, {len(agents):,} agents, {reported:,} RUNNING containers reported "
          f"({reported / len(agents):.1f} per heartbeat), connection limit {args.connections}")
    print(f"{'heartbeats/s':<28} {stats.ok_in_window / wall:8.1f}   (scheduled {len(agents) / 1.0:,.0f}/s; "
          f"errors {sum(stats.errors_in_window.values())}, missed slots {stats.missed_in_window})")
    print(pct_line("heartbeat latency", stats.latency))
    print(pct_line("  + client pool wait", [a + b for a, b in zip(stats.latency, stats.queued, strict=True)]))
    print(f"{'launcher CPU':<28} {cpu['launcher']:8.1f} % of one core   (target <= 50 %)")
    print(f"{'API workers CPU':<28} {cpu['api workers']:8.1f} % of one core   (arbiter and others "
          f"{cpu['arbiter']:.1f} %; none on SQLite)")
    print(f"{'postgres CPU (all)':<28} {cpu['postgres']:8.1f} % of one core")
    print(f"{'bench CPU (load generator)':<28} {bench_cpu:8.1f} % of one core")
    cores = os.cpu_count() or 1
    print(f"{'machine CPU':<28} {machine_cpu:8.1f} % of {cores} cores   (other processes: "
          f"{max(0.0, machine_cpu * cores - sum(cpu.values()) - bench_cpu):.0f} % of one core)")
    print(f"{'launcher RSS now / peak':<28} {now_rss:8.1f} MB / {peak_rss:.1f} MB")
    if stats.latency:
        print(f"{'heartbeat mean':<28} {statistics.fmean(stats.latency) * 1000:8.1f} ms")
    for text, count in stats.errors.most_common(5):
        print(f"errors over the whole run: {count} x {text}")
    return {"rate": stats.ok_in_window / wall, "p50": statistics.median(stats.latency) if stats.latency else 0.0,
            "p99": pct(stats.latency, 0.99) if stats.latency else 0.0,
            "errors": sum(stats.errors_in_window.values()), **cpu, "bench": bench_cpu,
            "machine": machine_cpu * cores, "rss": now_rss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=30.0, help="the measurement window (default 30)")
    parser.add_argument("--tasks-per-job", type=int, default=1)
    parser.add_argument("--cpus", type=int, default=0, help="CPUs per agent (default: ceil(tasks / agents))")
    parser.add_argument("--connections", type=int, default=100, help="the agents' client connection limit")
    parser.add_argument("--submit-concurrency", type=int, default=16)
    parser.add_argument("--wait", type=float, default=300.0,
                        help="longest wait for the tasks to be RUNNING (default 300; then it measures anyway)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds between RUNNING and the window")
    parser.add_argument("--check", type=int, default=200,
                        help="jobs whose detail is read to check their tasks are RUNNING (default 200)")
    parser.add_argument("--node-timeout", type=float, default=30.0, help="the master's --node-timeout")
    parser.add_argument("--database", default="sqlite,postgresql",
                        help="sqlite, postgresql, or both comma-separated (default: both, one after the other)")
    parser.add_argument("--workers", default="2", help="PostgreSQL: API worker processes (default 2; 1,2: each)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a SIGTERM cleans up like Ctrl-C
    env = {"PAI_ADMIN_PASSWORD": ADMIN_PASSWORD, "PAI_AGENT_TOKEN": AGENT_TOKEN}
    extra = ("--heartbeat", "1", "--node-timeout", str(args.node_timeout))
    results: list[tuple[str, dict[str, float]]] = []
    for database, workers in configs(args.database, args.workers):
        name = config_name(database, workers)
        print(f"\n{name}", flush=True)
        with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp_name, \
                database_url(database, Path(tmp_name)) as url, \
                master_process(Path(tmp_name), url, workers, env, extra) as master:
            try:
                results.append((name, asyncio.run(run(args, master))))
            except KeyboardInterrupt:
                print("interrupted", flush=True)
                return
            finally:
                for text in log_problems(master.log):
                    print(text)
    print("\n" + "\n".join(table(results)))


def table(results: list[tuple[str, dict[str, float]]]) -> list[str]:
    """One row per figure, one column per master."""
    if not results:
        return []
    width = max(len(name) for name, _ in results) + 2
    rows = [f"{'':<34}" + "".join(f"{name:>{width}}" for name, _ in results)]
    for label, key, unit in [("heartbeats/s", "rate", 1), ("heartbeat p50 (ms)", "p50", 1000),
                             ("heartbeat p99 (ms)", "p99", 1000), ("errors in the window", "errors", 1),
                             ("launcher CPU (% of a core)", "launcher", 1), ("API workers CPU (%)", "api workers", 1),
                             ("postgres CPU, all (%)", "postgres", 1), ("bench CPU (%)", "bench", 1),
                             ("machine CPU (% of a core)", "machine", 1), ("launcher RSS (MB)", "rss", 1)]:
        rows.append(f"{label:<34}" + "".join(f"{f[key] * unit:>{width}.1f}" for _, f in results))
    return rows


if __name__ == "__main__":
    main()
