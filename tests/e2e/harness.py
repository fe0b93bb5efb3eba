"""A real cluster for end-to-end tests: a master process and agent processes, each agent on its own
loopback address (127.0.0.2, 127.0.0.3, ...), talking over HTTP like in production."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pai.cli.api import MasterApi
from pai.cli.errors import ApiError, CliError
from pai.cli.http import HttpClient

ADMIN_PASSWORD = "e2e-secret-password"
AGENT_TOKEN = "e2e-agent-token"
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def processes_with(marker: str) -> list[int]:
    """Pids of the processes (other than this one) whose command line holds ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and int(entry.name) != os.getpid():
            pids.append(int(entry.name))
    return pids


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except CliError as e:
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


@dataclass
class Cluster:
    url: str
    api: MasterApi
    tmp: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    args: dict[str, list[str]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    agent_args: tuple[str, ...] = ("--runtime", "process")
    launcher_url: str = ""  # the master's launcher (PostgreSQL: a port of its own; SQLite: url)

    def spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        """Start ``pai <args>`` as process ``name`` (the master, or an agent); it is stopped at the end."""
        proc, log = _spawn(name, args, self.tmp, self.env)
        self.procs[name], self.logs[name], self.args[name] = proc, log, args
        return proc

    def spawn_agent(self, name: str, address: str, cpus: int, master_url: str | None = None) -> None:
        self.spawn(name, ["agent", "--master", master_url or self.url, "--name", name, "--address", address,
                          "--cpus", str(cpus), "--memory-mb", "4096", "--gpus", "0",
                          "--work-dir", str(self.tmp / name), "--kill-on-exit", *self.agent_args])

    def kill(self, name: str) -> None:
        """SIGKILL the process ``name`` alone (not its tasks, which live in sessions of their own)."""
        proc = self.procs[name]
        proc.kill()
        proc.wait()

    def restart(self, name: str) -> None:
        if self.procs[name].poll() is None:
            self.kill(name)
        self.spawn(name, self.args[name])

    def wait_master(self) -> None:
        proc, log = self.procs["master"], self.logs["master"]

        def up() -> Any:
            if proc.poll() is not None:
                raise AssertionError(f"the master exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            return self.api.http.json("GET", "/healthz")

        wait_for("the master", up, 30)

    def ready_nodes(self) -> set[str]:
        return {n["name"] for n in self.api.nodes() if n["state"] == "READY"}

    def submit(self, body: str | bytes, content_type: str = "application/json") -> str:
        data = body.encode() if isinstance(body, str) else body
        return str(self.api.submit(data, content_type)["jobName"])

    def job(self, key: str) -> dict[str, Any]:
        return self.api.job(key)

    def wait_state(self, key: str, states: set[str], timeout: float = 60.0) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            d = self.job(key)
            return d if d["jobStatus"]["state"] in states else None

        return dict(wait_for(f"{key} to reach {states}", probe, timeout, 0.2))

    def tasks(self, detail: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [(role, t) for role, info in detail["taskRoles"].items() for t in info["taskStatuses"]]

    def log(self, key: str, role: str, index: int, stream: str = "stdout") -> str:
        return self.api.task_log(key, role, index, stream)

    def raw(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None,
            token: str | None = "default") -> tuple[int, Any]:
        client = HttpClient(self.url, self.api.http.token if token == "default" else token)
        try:
            resp = client.request(method, path, body=body, content_type=content_type)
            return resp.status, client.decode_json(method, path, resp) if resp.content_type.endswith("json") \
                else resp.text()
        except ApiError as e:
            return e.status, {"code": e.code, "message": e.message}

    def master_log(self) -> str:
        return self.logs["master"].read_text(errors="replace")


def _spawn(name: str, args: list[str], tmp: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp / f"{name}.log"
    f = log.open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "pai", *args], stdout=f, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    f.close()
    return proc, log


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def cluster(tmp: Path, database_url: str | None, agents: list[tuple[str, str, int]],
            grace_seconds: float = 3.0, master_args: tuple[str, ...] = (),
            agent_args: tuple[str, ...] = ("--runtime", "process")) -> Iterator[Cluster]:
    """``agents``: (name, address, cpus). Yields once every agent is READY, the admin logged in."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD, "PAI_AGENT_TOKEN": AGENT_TOKEN}
    env.pop("PAI_DATABASE_URL", None)
    c = Cluster(url, MasterApi(HttpClient(url, timeout=10)), tmp, env=env, agent_args=agent_args)
    with ExitStack() as stack:
        stack.callback(lambda: [stop_process(p) for p in reversed(c.procs.values())])
        args = ["master", "--port", str(port), "--data-dir", str(tmp / "master"), "--grace-seconds",
                str(grace_seconds), "--heartbeat", "0.3", "--node-timeout", "10", "--advertise-url", url, *master_args]
        c.launcher_url = url
        if database_url:
            args += ["--database-url", database_url]
            if not database_url.startswith("sqlite"):  # the launcher's process and two API workers
                launcher = free_port()
                args += ["--launcher-port", str(launcher), "--workers", "2"]
                c.launcher_url = f"http://127.0.0.1:{launcher}"
        c.spawn("master", args)
        c.wait_master()
        c.api.http.token = c.api.login("admin", ADMIN_PASSWORD)["token"]
        for name, address, cpus in agents:
            c.spawn_agent(name, address, cpus)
        names = {a[0] for a in agents}
        wait_for("agents READY", lambda: names <= c.ready_nodes(), 30)
        yield c
