"""Several ``pai master`` processes on one PostgreSQL database and agents given every master (issue 27), for the
failover tests and bench/failover.py. A master is driven as an operator would, from the outside only: its command
line, its REST API (``GET /api/v2/masters``), its ``/metrics`` and its log. Each master runs in a session of its own,
and is killed, frozen (SIGSTOP) and thawed as a whole process group: a master may be several processes.

A master keeps its name, port, URL and data directory across a restart (the agents know it by its URL); every
master gets the first one's secret key."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pai.cli.api import MasterApi
from pai.cli.errors import CliError
from pai.cli.http import HttpClient
from tests.e2e.harness import ADMIN_PASSWORD, AGENT_TOKEN, TERMINAL, Cluster, stop_process, wait_for

ORDER = {"WAITING": 0, "RUNNING": 1, **dict.fromkeys(TERMINAL, 2)}  # a job's state never goes down this order


def master_ports(n: int) -> list[int]:
    """``n`` free ports, each with the one after it free too (a master's launcher listens on its port + 1 here)."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        with socket.socket() as s, contextlib.suppress(OSError):
            s.bind(("127.0.0.1", port + 1))
            if not {port - 1, port, port + 1} & set(ports):
                ports.append(port)
    return ports


def metric(url: str, name: str) -> float:
    """The value of the unlabelled sample ``name`` in the master's /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))


def sleeper(name: str, starts: Path, seconds: float, cpus: int = 1) -> bytes:
    """A one-task job that appends a line to ``starts/<name>`` each time its task starts, then sleeps."""
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": cpus, "memoryMB": 128, "gpuNumber": 0,
         "command": f"echo $PAI_TASK_INDEX >> {starts}/{name}; sleep {seconds:g}"}]}).encode()


def task_state(detail: dict[str, Any]) -> str:
    tasks = [t for role in detail["taskRoles"].values() for t in role["taskStatuses"]]
    return str(tasks[0]["taskState"]) if tasks else "WAITING"


def started_more_than_once(starts: Path) -> dict[str, int]:
    """The jobs whose task recorded more than one start, and how many."""
    counts = {f.name: len(f.read_text().splitlines()) for f in starts.iterdir()}
    return {name: n for name, n in counts.items() if n > 1}


@dataclass
class Ha:
    c: Cluster  # the processes, their logs and environment
    database_url: str
    master_args: tuple[str, ...]
    ports: dict[str, int]  # each master's; it keeps it across restarts
    apis: dict[str, MasterApi] = field(default_factory=dict)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def launcher_url(self, name: str) -> str:
        """The master's launcher (the agents' endpoints, the lease's metrics)."""
        return f"http://127.0.0.1:{self.ports[name] + 1}"

    @property
    def all_urls(self) -> str:
        return ",".join(self.url(name) for name in self.ports)

    def start_master(self, name: str) -> None:
        """Start (or start again) the master ``name``; returns once it answers, its admin logged in."""
        port, url, data = self.ports[name], self.url(name), self.c.tmp / name
        first = next(iter(self.ports))
        if not data.exists():
            data.mkdir(mode=0o700)
            if name != first:  # every master gets the first one's secret key
                shutil.copy2(self.c.tmp / first / "secret-key", data / "secret-key")
        self.c.spawn(name, ["master", "--port", str(port), "--data-dir", str(data), "--database-url",
                            self.database_url, "--advertise-url", url, "--launcher-port", str(port + 1),
                            "--workers", "2", *self.master_args])
        api = MasterApi(HttpClient(url, timeout=10))
        proc = self.c.procs[name]

        def up() -> Any:
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited {proc.returncode}:\n{self.log(name)[-3000:]}")
            return api.http.json("GET", "/healthz")

        wait_for(f"{name} to answer", up, 30)
        api.http.token = api.login("admin", ADMIN_PASSWORD)["token"]
        self.apis[name] = api

    def log(self, name: str) -> str:
        return self.c.logs[name].read_text(errors="replace")

    def signal(self, name: str, sig: signal.Signals) -> None:
        """Send ``sig`` to every process of the master ``name`` (its process group)."""
        os.killpg(self.c.procs[name].pid, sig)

    def kill(self, name: str) -> None:
        """SIGKILL the master ``name``, every process of it."""
        self.signal(name, signal.SIGKILL)
        self.c.procs[name].wait()

    def alive(self) -> list[str]:
        return [name for name in self.ports if self.c.procs[name].poll() is None]

    def masters(self, name: str) -> list[tuple[str, str, bool]]:
        """``GET /api/v2/masters`` from the master ``name``: (url, role, self) of each."""
        return [(m["url"], m["role"], m["self"]) for m in self.apis[name].masters()]

    def leading(self, name: str) -> bool:
        """Whether the master ``name`` says it leads (the API and /metrics agree)."""
        return (self.url(name), "leader", True) in self.masters(name) and metric(self.launcher_url(name),
                                                                                 "pai_master_leader") == 1.0

    def wait_leader(self, among: list[str], timeout: float) -> str:
        """The name of the master among ``among`` that leads, once one does."""

        def probe() -> str | None:
            for name in among:
                with contextlib.suppress(CliError, OSError):
                    if self.leading(name):
                        return name
            return None

        try:
            return str(wait_for(f"one of {among} to lead", probe, timeout, 0.05))
        except AssertionError as e:  # why not, for the record: what each master said last
            said = "\n".join(f"--- {name}:\n{self.log(name)[-2500:]}" for name in self.ports)
            raise AssertionError(f"{e}\n{said}") from None

    def wait_standby(self, name: str, timeout: float) -> None:
        wait_for(f"{name} listed as a standby", lambda: (self.url(name), "standby", True) in self.masters(name),
                 timeout)

    def stop_master(self, name: str) -> None:
        proc = self.c.procs[name]
        with contextlib.suppress(ProcessLookupError):
            self.signal(name, signal.SIGCONT)  # a frozen master cannot stop
        stop_process(proc)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of it is left


@contextmanager
def ha_cluster(tmp: Path, database_url: str, masters: int, agents: list[tuple[str, str, int]],
               master_args: tuple[str, ...] = (), heartbeat: float = 0.3,
               node_timeout: float = 10.0) -> Iterator[Ha]:
    """``masters`` masters (``master-a``, ``master-b``, ...; ``master-a`` started first, so it leads) on
    ``database_url`` and ``agents`` (name, address, cpus) given every master's URL; yields once the agents are READY."""
    env = {**os.environ, "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD, "PAI_AGENT_TOKEN": AGENT_TOKEN}
    env.pop("PAI_DATABASE_URL", None)
    names = [f"master-{chr(ord('a') + i)}" for i in range(masters)]
    ports = dict(zip(names, master_ports(masters), strict=True))
    first = f"http://127.0.0.1:{ports[names[0]]}"
    c = Cluster(first, MasterApi(HttpClient(first, timeout=10)), tmp, env=env)
    args = ("--grace-seconds", "3", "--heartbeat", str(heartbeat), "--node-timeout", str(node_timeout), *master_args)
    ha = Ha(c, database_url, args, ports)
    def stop() -> None:  # the agents first
        for agent in [a for a, _, _ in agents if a in c.procs]:
            stop_process(c.procs[agent])
        for master in [m for m in reversed(names) if m in c.procs]:
            ha.stop_master(master)

    with ExitStack() as stack:
        stack.callback(stop)
        for name in names:
            ha.start_master(name)
        ha.wait_leader(names[:1], 30)
        for name, address, cpus in agents:
            c.spawn_agent(name, address, cpus, master_url=ha.all_urls)
        wanted = {a[0] for a in agents}
        leader = ha.apis[names[0]]
        wait_for("agents READY", lambda: wanted <= {n["name"] for n in leader.nodes() if n["state"] == "READY"}, 30)
        yield ha


def wait_ended(api: MasterApi, keys: list[str], timeout: float) -> dict[str, str]:
    """Each job's final state, once every one has ended."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    for key in keys:
        def ended(key: str = key) -> str | None:
            state = str(api.job(key)["jobStatus"]["state"])
            return state if state in TERMINAL else None

        states[key] = str(wait_for(f"{key} to end", ended, max(0.1, deadline - time.monotonic()), 0.2))
    return states
