"""What the benchmarks share about the master they measure: ``pai master`` started as it is deployed (one process on
SQLite; on PostgreSQL the launcher's process and ``--workers`` API worker processes under gunicorn's arbiter), the
wait for it, and the CPU time and memory of its processes, of PostgreSQL's and of the whole machine."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from tests.e2e.harness import free_port, stop_process

CLK_TCK = os.sysconf("SC_CLK_TCK")


def configs(databases: str, workers: str) -> list[tuple[str, int]]:
    """``--database sqlite,postgresql --workers 1,2,4`` as (database, workers) pairs: SQLite once (0 workers: one
    process), PostgreSQL once per worker count."""
    out: list[tuple[str, int]] = []
    for database in (d.strip() for d in databases.split(",") if d.strip()):
        if database not in ("sqlite", "postgresql"):
            raise SystemExit(f"--database {database}: sqlite or postgresql")
        out += [("sqlite", 0)] if database == "sqlite" else [("postgresql", int(n)) for n in workers.split(",")]
    return out


def config_name(database: str, workers: int) -> str:
    return "SQLite, 1 process" if not workers else f"PostgreSQL, {workers} worker{'s' * (workers > 1)}"


@dataclass(frozen=True)
class Master:
    proc: subprocess.Popen[bytes]
    url: str  # the users' API (the API workers on PostgreSQL)
    launcher_url: str  # the agents' endpoints (the launcher's port on PostgreSQL; the same URL on SQLite)
    log: Path


def master_args(tmp: Path, database_url: str | None, workers: int) -> tuple[list[str], str, str]:
    """``pai master``'s arguments for a master in ``tmp`` (``database_url`` None: SQLite in its data directory),
    its API URL and its launcher's URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["master", "--port", str(port), "--data-dir", str(tmp / "master"), "--advertise-url", url]
    if database_url:
        args += ["--database-url", database_url]
    if not workers:
        return args, url, url
    launcher = free_port()
    return [*args, "--workers", str(workers), "--launcher-port", str(launcher)], url, f"http://127.0.0.1:{launcher}"


@contextmanager
def master_process(tmp: Path, database_url: str | None, workers: int, env: dict[str, str],
                   extra: Sequence[str] = ()) -> Iterator[Master]:
    """``python -m pai master`` in a session of its own, its output in ``tmp/master.log``; stopped on exit."""
    args, url, launcher_url = master_args(tmp, database_url, workers)
    env = {**os.environ, **env}
    env.pop("PAI_DATABASE_URL", None)
    log = tmp / "master.log"
    with log.open("wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "pai", *args, *extra], stdout=f, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    try:
        yield Master(proc, url, launcher_url, log)
    finally:
        stop_process(proc)


async def wait_healthy(base: str, proc: subprocess.Popen[bytes] | None = None,
                       log: Path | None = None) -> None:
    """Until the master at ``base`` answers /healthz (60 s at most); a master process that exits ends the wait."""
    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            if proc is not None and proc.poll() is not None:
                tail = log.read_text()[-3000:] if log is not None else ""
                raise SystemExit(f"the master exited {proc.returncode}:\n{tail}")
            try:
                async with http.get(base + "/healthz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("the master did not answer /healthz within 60 s")


def _stats() -> dict[int, tuple[int, str, float]]:
    """Every process's (parent, command name, CPU seconds)."""
    out: dict[int, tuple[int, str, float]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            head, fields = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        values = fields.split()
        out[int(stat.parent.name)] = (int(values[1]), head.split("(", 1)[1],
                                      (int(values[11]) + int(values[12])) / CLK_TCK)
    return out


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs (the master's: gunicorn's arbiter and its API workers)."""
    children: dict[int, list[int]] = {}
    for child, (parent, _, _) in _stats().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found.extend(below)
        todo.extend(below)
    return found


def cpu_by_role(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of the master's processes by role: ``launcher`` (the master's own
    process: on SQLite, everything), ``api workers`` (the arbiter's children), ``arbiter`` (and any other process
    the master started), and ``postgres`` (every PostgreSQL server process on this machine: shared with whatever
    else uses it)."""
    stats = _stats()
    children: dict[int, list[int]] = {}
    for child, (parent, _, _) in stats.items():
        children.setdefault(parent, []).append(child)
    used = {"launcher": stats[pid][2] if pid in stats else 0.0, "api workers": 0.0, "arbiter": 0.0, "postgres": 0.0}
    for child in children.get(pid, []):
        used["arbiter"] += stats[child][2]
        for worker in children.get(child, []):
            used["api workers"] += stats[worker][2]
    used["postgres"] = sum(cpu for _, name, cpu in stats.values() if name == "postgres")
    return used


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: max(0.0, after[name] - before.get(name, 0.0)) for name in after}


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all cores since boot (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def rss_mb(pid: int) -> tuple[float, float]:
    """VmRSS and VmHWM (its peak) of ``pid``, in MB."""
    status = dict(ln.split(":", 1) for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in ln)
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def started_rss_mb(pid: int) -> list[float]:
    """VmRSS of each process the master started (gunicorn's arbiter and its API workers), in MB."""
    others = []
    for child in descendants(pid):
        try:
            others.append(rss_mb(child)[0])
        except (OSError, KeyError):
            continue
    return others


def memory(pid: int) -> str:
    """The master's own process's RSS now / at its peak, and the processes it started."""
    now, peak = rss_mb(pid)
    others = started_rss_mb(pid)
    return f"{now:.1f} MB / {peak:.1f} MB; {len(others)} processes of its own {sum(others):.1f} MB"
