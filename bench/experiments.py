"""Trial reports against a real master: ``python bench/experiments.py [--trials 100] [--rate 10] [--seconds 30]
[--searcher asha|random] [--database sqlite|postgresql] [--runs N]`` (from the project's root: ``PYTHONPATH=.``).

A real ``pai master`` (subprocess) runs an experiment of ``--trials`` concurrent trials (maxTrials ten times that, so
that a trial the searcher stops is replaced). The benchmark plays the node agent: it registers a node big enough for
every trial, heartbeats, takes each start command's PAI_TRIAL_ID and PAI_TRIAL_TOKEN, and for each trial sends
``--rate`` reports a second (``{"loss", "acc"}`` at the next step, paced on a fixed schedule, not after the previous
answer) until a report answers ``stop``; then it reports the task exited, and the master starts the next trial.
ASHA's first rung (maxTime 3200, divisor 4: steps 200, 800) is reached within a run of 30 s: the searcher decides
on every tick, and stops trials at the end.

"On one core" (the goal): with ``--pin`` (the default where the benchmark may use 2 CPUs or more) the master and
everything it starts (its threads, the searcher's process, gunicorn's API workers) run on one CPU and the client on
another (``sched_setaffinity``); ``--no-pin`` leaves both to the kernel. The line ``pinned:`` says which.

Printed: reports accepted per second, their latency (p50, p99); the share of reports the master's handler took over
10 ms and over 25 ms (``pai_rest_request_duration_seconds``: from the request's handler to its answer, the wait for
the writer thread included, the HTTP parsing and the event loop's queue not); the client's own event-loop lag (p99:
how much of a latency is the client's); the master's CPU (its processes, all threads) as a share of one core and per
report accepted; how long the master's and the client's threads were ready to run but waited for a CPU (the kernel's
schedstat: on a shared machine, what others' work cost them); the reports stored in one transaction on average
(``pai_trial_report_batch_size``: those that waited for the writer together); and the searcher's decisions
(``pai_searcher_decide_seconds`` from the master's /metrics): how many, their mean time, and their time per report;
and what held the launcher's writer thread most (``pai_store_writer_seconds``, by call: how many, how long in all,
how many over 25 ms).
The master's /metrics are read one second before the measure starts (a scrape costs the master a few milliseconds:
not the first reports' wait) and after it ends. The client collects no garbage while it measures (``gc.freeze``,
``gc.disable``): a collection of its own (80-180 ms seen here) paused its clock with reports in flight, and counted
in their latency. Figures, not assertions. Goal (issue 29): 1,000 reports/s on one core with p99 <= 20 ms.

``--runs N`` measures N times, each against a master of its own, with a sync and a pause before each run after the
first, and ends with the spread of the runs' reports/s and p99: at ASHA's rung one run's p99 moves from run to run
several times over with the same code (docs/experiments.md), and a run started right after another measured worse.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import re
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import astuple, dataclass, field, replace
from pathlib import Path
from typing import Any

import requests
from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector

from bench.figures import pct
from tests.dbkit import database_url
from tests.e2e.harness import AGENT_TOKEN, Cluster, cluster

NODE = "bench-node"
WARMUP = 5.0  # seconds before the measure: every trial started, its connection open
SETTLE = 1.0  # seconds between the scrape of the master's /metrics before the measure and its start
PAUSE = 10.0  # seconds between two runs (``--runs``), after a sync: a run right after another measured worse
TICKS = os.sysconf("SC_CLK_TCK")


def experiment(trials: int, searcher: str) -> str:
    search: dict[str, Any] = {"name": searcher, "metric": "loss", "maxTrials": trials * 10,
                              "maxConcurrentTrials": trials}
    if searcher == "asha":
        search |= {"maxTime": 3200, "divisor": 4}
    return json.dumps({
        "protocolVersion": 2, "name": "bench", "type": "experiment", "searcher": search,
        "hyperparameters": {"lr": {"type": "log", "minval": 0.0001, "maxval": 1.0}},
        "trial": {"prerequisites": [{"name": "img", "type": "dockerimage", "uri": "busybox"}],
                  "taskRoles": {"t": {"dockerImage": "img", "commands": ["true"],
                                      "resourcePerInstance": {"cpu": 1, "gpu": 0, "memoryMB": 128}}}},
    })


@dataclass
class Load:
    url: str
    rate: float
    since: float  # what is counted: from then (every trial started, connections open) until ``until``
    until: float
    latencies: list[float] = field(default_factory=list)
    accepted: int = 0
    refused: int = 0
    failed: int = 0  # no answer (the connection broke)
    errors: Counter[str] = field(default_factory=Counter)  # the refusals, by status and code
    stopped: int = 0
    running: dict[str, dict[str, Any]] = field(default_factory=dict)  # attempt id -> its container report
    exited: list[dict[str, Any]] = field(default_factory=list)  # reports of attempts that ended (sent once)
    started: set[str] = field(default_factory=set)
    lags: list[float] = field(default_factory=list)  # how late the client's own loop woke a 10 ms sleep


async def trial(load: Load, session: ClientSession, start: dict[str, Any]) -> None:
    env = start["env"]
    url = f"{load.url}/api/v2/trials/{env['PAI_TRIAL_ID']}/metrics"
    headers = {"Authorization": f"Bearer {env['PAI_TRIAL_TOKEN']}"}
    quality = random.Random(env["PAI_TRIAL_ID"]).uniform(0.1, 2.0)  # a curve of its own: some trials are worse
    step, next_at = 0, time.monotonic() + random.random() / load.rate
    while next_at < load.until:
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        body = {"step": step, "metrics": {"loss": quality / (1 + step), "acc": 1 - quality / (2 + step)}}
        began = time.monotonic()
        try:
            async with session.post(url, json=body, headers=headers) as resp:
                answer = await resp.json()
        except ClientError:
            load.failed += began >= load.since
            continue  # the same step again, at once
        if began >= load.since:
            load.latencies.append(time.monotonic() - began)
            load.accepted += resp.status == 200
            if resp.status != 200:
                load.refused += 1
                load.errors[f"{resp.status} {answer.get('code')}"] += 1
            load.stopped += resp.status == 200 and answer["stop"]
        if resp.status == 200 and answer["stop"]:
            break
        step, next_at = step + 1, next_at + 1 / load.rate
    report = load.running.pop(start["attemptId"])
    load.exited.append({**report, "status": "exited", "exitCode": 0})


async def agent(load: Load, c: Cluster, session: ClientSession) -> None:
    """Heartbeats every 0.3 s with every attempt's report; each new start command becomes a reporting trial."""
    headers = {"Authorization": f"Bearer {AGENT_TOKEN}"}
    beat = f"{c.launcher_url}/api/internal/agents/{NODE}/heartbeat"
    trials: list[asyncio.Task[None]] = []
    while time.monotonic() < load.until:
        exited, load.exited = load.exited, []
        body = {"version": 1, "node": NODE, "containers": [*load.running.values(), *exited]}
        async with session.post(beat, json=body, headers=headers) as resp:
            reply = await resp.json()
        for command in reply["commands"]:
            if command["type"] != "start" or command["attemptId"] in load.started:
                continue
            load.started.add(command["attemptId"])
            load.running[command["attemptId"]] = {
                "attemptId": command["attemptId"], "jobKey": command["jobKey"], "role": command["role"],
                "index": command["index"], "status": "running"}
            trials.append(asyncio.create_task(trial(load, session, command)))
        await asyncio.sleep(0.3)
    await asyncio.gather(*trials)


async def lag(load: Load) -> None:
    """The client's event loop: how late it wakes from a 10 ms sleep (a latency includes this)."""
    while time.monotonic() < load.until:
        began = time.monotonic()
        await asyncio.sleep(0.01)
        if began >= load.since:
            load.lags.append(time.monotonic() - began - 0.01)


def cpu_seconds(pid: int) -> float:
    """The CPU of ``pid`` and the processes under it (PostgreSQL: gunicorn's API workers; the searcher's)."""
    total = 0.0
    for p in tree(pid):
        with contextlib.suppress(OSError):  # ended meanwhile
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (of every thread)
    return total


def tree(pid: int) -> set[int]:
    """``pid`` and every process under it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    found, grown = {pid}, True
    while grown:
        more = {p for p, parent in parents.items() if parent in found} | found
        grown, found = more != found, more
    return found


def pin(pid: int, cpu: int) -> int:
    """Every thread of ``pid`` and of the processes under it on ``cpu``; how many threads."""
    threads = 0
    for p in tree(pid):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            for task in Path(f"/proc/{p}/task").iterdir():
                os.sched_setaffinity(int(task.name), {cpu})
                threads += 1
    return threads


def waited_seconds(pid: int, children: bool = True) -> float:
    """How long the threads of ``pid`` (and, with ``children``, of the processes under it) were ready to run but
    waited for a CPU (the kernel's schedstat): what other work on their CPU cost them."""
    total = 0
    for p in tree(pid) if children else {pid}:
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{p}/task").iterdir():
                with contextlib.suppress(OSError):
                    total += int((task / "schedstat").read_text().split()[1])
    return total / 1e9


@dataclass
class Figures:
    """What the master's /metrics say: the searcher's decisions (seconds in all, how many), and its handling of
    the reports (how many, and how many took over 10 ms and over 25 ms: from its histogram's buckets)."""

    decide_sum: float = 0.0
    decide_count: float = 0.0
    handled: float = 0.0
    over_10ms: float = 0.0
    over_25ms: float = 0.0
    batches: float = 0.0  # transactions that stored reports (pai_trial_report_batch_size)
    batched: float = 0.0  # the reports they stored
    checkpoints: float = 0.0  # SQLite's checkpoints of its write-ahead log on a thread of their own
    checkpoint_sum: float = 0.0  # (pai_sqlite_checkpoint_seconds{on="thread"})
    writer_checkpoints: float = 0.0  # and what was left of the log, on the writer thread ({on="writer"})
    writer_checkpoint_sum: float = 0.0
    wal_pages: float = 0.0  # the log's pages at the last checkpoint (pai_sqlite_wal_pages; not a difference)

    def __sub__(self, other: Figures) -> Figures:
        return replace(Figures(*(a - b for a, b in zip(astuple(self), astuple(other), strict=True))),
                       wal_pages=self.wal_pages)


Held = dict[str, tuple[float, float, float]]  # a writer call -> (calls, seconds in all, calls over 25 ms)


def writer_held(text: str) -> Held:
    """What held the launcher's writer thread (``pai_store_writer_seconds``), by call."""
    sums = dict(re.findall(r'^pai_store_writer_seconds_sum\{call="([^"]+)"\} (\S+)$', text, re.M))
    buckets: dict[str, dict[str, float]] = {}
    for call, le, n in re.findall(r'^pai_store_writer_seconds_bucket\{call="([^"]+)",le="([^"]+)"\} (\S+)$', text,
                                  re.M):
        buckets.setdefault(call, {})[le] = float(n)
    return {call: (b["+Inf"], float(sums.get(call, 0.0)), b["+Inf"] - b["0.025"]) for call, b in buckets.items()}


def held_since(now: Held, before: Held) -> Held:
    zero = (0.0, 0.0, 0.0)
    return {call: (n - before.get(call, zero)[0], t - before.get(call, zero)[1], o - before.get(call, zero)[2])
            for call, (n, t, o) in now.items()}


def launcher_text(c: Cluster) -> str:
    return requests.get(f"{c.launcher_url}/metrics", timeout=10).text


def master_figures(c: Cluster, text: str) -> Figures:
    """From the launcher's /metrics ``text`` (the searcher runs in the launcher), and the API's on PostgreSQL."""
    if c.url != c.launcher_url:  # PostgreSQL: the reports are the API workers' (their /metrics sums them)
        text += requests.get(f"{c.url}/metrics", timeout=10).text
    got = Figures()
    for name, value in re.findall(r"^pai_searcher_decide_seconds_(sum|count)\{[^}]*\} (\S+)$", text, re.M):
        if name == "sum":
            got.decide_sum += float(value)
        else:
            got.decide_count += float(value)
    for name, value in re.findall(r"^pai_trial_report_batch_size_(sum|count) (\S+)$", text, re.M):
        if name == "sum":
            got.batched += float(value)
        else:
            got.batches += float(value)
    fields = {("count", "thread"): "checkpoints", ("sum", "thread"): "checkpoint_sum",
              ("count", "writer"): "writer_checkpoints", ("sum", "writer"): "writer_checkpoint_sum"}
    for name, on, value in re.findall(r'^pai_sqlite_checkpoint_seconds_(count|sum)\{on="(thread|writer)"\} (\S+)$',
                                      text, re.M):
        setattr(got, fields[name, on], float(value))
    for value in re.findall(r"^pai_sqlite_wal_pages (\S+)$", text, re.M):
        got.wal_pages = float(value)
    buckets = {float(le): float(n) for le, route, n in re.findall(
        r'^pai_rest_request_duration_seconds_bucket\{le="([^"]+)",method="POST",route="([^"]+)",status_class="2xx"\}'
        r" (\S+)$", text, re.M) if route.startswith("/api/v2/trials/") and route.endswith("/metrics")}
    if buckets:
        got.handled = buckets[float("inf")]
        got.over_10ms, got.over_25ms = got.handled - buckets[0.01], got.handled - buckets[0.025]
    return got


def wal_bytes(c: Cluster) -> int | None:
    """The size of the SQLite database's write-ahead log now (None: not SQLite)."""
    wal = c.tmp / "pai.db-wal"
    return wal.stat().st_size if wal.exists() else None


async def run(c: Cluster, trials: int, rate: float, seconds: float, searcher: str) -> tuple[float, float]:
    """One measure against the master of ``c``, printed; its reports accepted a second and their p99 (seconds)."""
    token = c.api.http.token or ""
    admin = {"Authorization": f"Bearer {token}"}
    async with ClientSession(connector=TCPConnector(limit=0), timeout=ClientTimeout(total=60)) as session:
        register = {"version": 1, "node": {"name": NODE, "address": "127.0.0.30",
                                           "resources": {"gpu": 0, "cpu": trials, "memoryMB": 128 * trials}}}
        async with session.post(f"{c.launcher_url}/api/internal/agents/register", json=register,
                                headers={"Authorization": f"Bearer {AGENT_TOKEN}"}) as resp:
            assert resp.status == 200, await resp.text()
        async with session.post(f"{c.url}/api/v2/experiments", data=experiment(trials, searcher),
                                headers={**admin, "Content-Type": "application/json"}) as resp:
            assert resp.status == 202, await resp.text()
        pid = c.procs["master"].pid
        now = time.monotonic()
        load = Load(c.url, rate, now + WARMUP, now + WARMUP + seconds)
        playing = asyncio.create_task(agent(load, c, session))
        lagging = asyncio.create_task(lag(load))
        await asyncio.sleep(WARMUP - SETTLE)
        # scrapes: not in the measure (it starts once settled)
        text = await asyncio.to_thread(launcher_text, c)
        before, held_before = await asyncio.to_thread(master_figures, c, text), writer_held(text)
        await asyncio.sleep(max(0.0, load.since - time.monotonic()))
        cpu, waited, mine = await asyncio.to_thread(
            lambda: (cpu_seconds(pid), waited_seconds(pid), waited_seconds(os.getpid(), children=False)))
        gc.freeze()  # the client's own collections would pause its clock mid-measure: none until the end
        gc.disable()
        await playing
        await lagging
        wall = time.monotonic() - load.since
        cpu, waited = cpu_seconds(pid) - cpu, waited_seconds(pid) - waited
        mine = waited_seconds(os.getpid(), children=False) - mine
        gc.enable()
        wal = wal_bytes(c)
        text = launcher_text(c)
        got, held = master_figures(c, text) - before, held_since(writer_held(text), held_before)
    lat = load.latencies
    print(f"trials at once {trials}, {rate:g} reports/s each, searcher {searcher}, {wall:.0f} s measured")
    print(f"reports accepted       {load.accepted / wall:8.0f} /s   (offered {trials * rate:.0f}/s; refused "
          f"{load.refused}; no answer {load.failed}; trials stopped by the searcher {load.stopped})")
    if load.errors:
        print(f"refusals               {dict(load.errors)}")
    print(f"report latency         p50 {pct(lat, 0.5) * 1000:6.1f} ms   p99 {pct(lat, 0.99) * 1000:6.1f} ms   "
          f"max {max(lat) * 1000:6.1f} ms   (n={len(lat)})")
    if got.handled:
        print(f"in the master          {got.over_10ms / got.handled * 100:6.2f} % over 10 ms   "
              f"{got.over_25ms / got.handled * 100:6.2f} % over 25 ms   (its handler's time: from its histogram)")
    print(f"client loop lag        p50 {pct(load.lags, 0.5) * 1000:6.1f} ms   p99 {pct(load.lags, 0.99) * 1000:6.1f} "
          f"ms   (the client's share of a latency)")
    print(f"master CPU             {cpu / wall * 100:8.0f} % of one core   ({cpu:.1f} s in {wall:.0f} s, its "
          f"processes together)   {cpu / max(load.accepted, 1) * 1e6:.0f} us per report accepted")
    print(f"waiting for a CPU      master {waited / wall * 100:5.1f} % of the time   client "
          f"{mine / wall * 100:5.1f} %   (ready to run, not running: their threads together)")
    if got.batches:
        print(f"reports a transaction  {got.batched / got.batches:8.1f}   ({got.batches:.0f} transactions, "
              f"{got.batches / wall:.0f} /s)")
    if got.checkpoints:
        mean_ms = got.checkpoint_sum / got.checkpoints * 1000
        writer_ms = got.writer_checkpoint_sum / max(got.writer_checkpoints, 1) * 1000
        print(f"SQLite checkpoints     {got.checkpoints:8.0f}   mean {mean_ms:.1f} ms on a thread of their own; "
              f"{got.writer_checkpoints:.0f} on the writer (the log restarted), mean {writer_ms:.1f} ms")
        print(f"SQLite's log           {got.wal_pages:8.0f} pages at the last checkpoint   its file "
              f"{(wal or 0) / 2**20:.1f} MiB (as large as it has been)")
    mean = got.decide_sum / got.decide_count * 1000 if got.decide_count else 0.0
    print(f"searcher decisions     {got.decide_count:8.0f}   mean {mean:.1f} ms   "
          f"{got.decide_sum / max(load.accepted, 1) * 1e6:.0f} us per report   ({got.decide_sum:.1f} s in all)")
    print("the writer thread held by (pai_store_writer_seconds, the busiest calls; wall time, the GIL's waits in it):")
    for call, (n, seconds, over) in sorted(held.items(), key=lambda kv: -kv[1][1])[:6]:
        if n:
            print(f"  {call:32s} {n:7.0f} calls  {seconds:6.2f} s  mean {seconds / n * 1000:6.2f} ms  "
                  f"over 25 ms {over:4.0f}")
    print("goal: 1000 reports/s on one core, p99 <= 20 ms")
    return load.accepted / wall, pct(lat, 0.99)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--rate", type=float, default=10.0, help="reports a second per trial")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--searcher", choices=("asha", "random"), default="asha")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    cpus = sorted(os.sched_getaffinity(0))
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=len(cpus) >= 2,
                        help="the master's processes on one CPU, the client on another (default: on, given 2 CPUs)")
    parser.add_argument("--runs", type=int, default=1,
                        help="measures, each against a master of its own, after a sync and a pause (default 1)")
    args = parser.parse_args()
    figures = []
    for n in range(args.runs):
        if n:
            print()
            os.sync()  # the last run's writes reach the disk now, not while the next one measures
            time.sleep(PAUSE)
        figures.append(measure(args, cpus))
    if args.runs > 1:
        rates, p99s = sorted(f[0] for f in figures), sorted(f[1] * 1000 for f in figures)
        print(f"\nover {args.runs} runs: reports accepted {rates[0]:.0f}-{rates[-1]:.0f} /s, p99 median "
              f"{statistics.median(p99s):.1f} ms (min {p99s[0]:.1f}, max {p99s[-1]:.1f}): "
              f"{', '.join(f'{p:.1f}' for p in p99s)}")


def measure(args: argparse.Namespace, cpus: list[int]) -> tuple[float, float]:
    """One run: a master of its own, started, measured and stopped."""
    master_cpu, client_cpu = cpus[0], cpus[-1]
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with database_url(args.database, tmp) as url, contextlib.ExitStack() as stack:
            if args.pin:  # what the master starts (its threads, its processes) inherits the CPU; the client moves
                os.sched_setaffinity(0, {master_cpu})
            c = stack.enter_context(cluster(tmp, url, []))
            print(f"database: {args.database}")
            if args.pin:
                os.sched_setaffinity(0, {client_cpu})
                threads = pin(c.procs["master"].pid, master_cpu)
                print(f"pinned: the master on CPU {master_cpu} ({threads} threads), the client on CPU {client_cpu}")
            else:
                print(f"not pinned: the master and the client share CPUs {cpus}")
            try:
                return asyncio.run(run(c, args.trials, args.rate, args.seconds, args.searcher))
            except Exception:
                print(c.master_log()[-3000:])
                raise
            finally:
                os.sched_setaffinity(0, cpus)  # the next run's master starts from every CPU again


if __name__ == "__main__":
    main()
