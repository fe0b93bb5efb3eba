"""The bare-metal route, end to end on this machine: exactly what deploy/systemd's units run, with the samples as
/etc/pai's files (edited as an operator edits them: the database URL, the secrets, this test's ports), a master on
a fresh PostgreSQL database and two agents (``pai-agent@node-a``, ``pai-agent@node-b``) with the process runtime.
The hello example runs to SUCCEEDED through the ``pai`` CLI, then everything is stopped as ``systemctl stop`` stops
it (SIGTERM to the main process; the agent's KillMode=process leaves its lease watchdog, which exits by itself)."""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, make_url, text

from pai.cli.api import MasterApi
from pai.cli.errors import CliError
from pai.cli.http import HttpClient
from pai.store.db import normalize_url
from tests.deploy.dockerfile import healthcheck, parse
from tests.deploy.settings import PAI_SCRIPT, ROOT
from tests.deploy.systemd import AGENT_ENV, AGENT_UNIT, MASTER_ENV, MASTER_UNIT, Service, parse_env_file, service
from tests.e2e.harness import processes_with
from tests.eventually import eventually
from tests.store.conftest import POSTGRES_URL, require_postgres

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

EXECUTABLE = "/usr/local/bin/pai"
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # a system service's PATH
AGENTS = {"node-a": "127.0.0.2", "node-b": "127.0.0.3"}
# The agents' lease watchdogs outlive a stopped agent by the node timeout; a shorter one than the default 30 s
# keeps this test short (the operator's edit of PAI_MASTER_OPTS; the sample's flags stay, the later one wins).
NODE_TIMEOUT = "15"


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def edit(text_: str, changes: dict[str, str]) -> str:
    """Set variables of an environment file as an operator does: in place (uncommenting a ``#KEY=`` default)."""
    for key, value in changes.items():
        line = f'{key}="{value}"' if " " in value else f"{key}={value}"
        text_, n = re.subn(rf"(?m)^#?{key}=.*$", line.replace("\\", "\\\\"), text_)
        if n == 0:
            text_ += line + "\n"
    return text_


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty PostgreSQL database (as `createdb pai` makes), dropped afterwards."""
    require_postgres()
    name = f"pai_deploy_{secrets.token_hex(5)}"
    admin = create_engine(normalize_url(POSTGRES_URL), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


class Started:
    """One unit's main process, started as systemd starts it."""

    def __init__(self, name: str, run: Service, tmp: Path) -> None:
        assert run.argv[0] == EXECUTABLE
        for d in run.state_dirs:  # StateDirectory=: systemd makes them before the start
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.name, self.log = name, tmp / f"{name}.log"
        env = {"PATH": SYSTEMD_PATH, "HOME": str(tmp / "home"), "LANG": "C.UTF-8", **run.env}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([str(PAI_SCRIPT), *run.argv[1:]], env=env, cwd="/", stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited {self.proc.returncode}:\n{self.output()[-3000:]}")
        return True

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:  # systemctl stop: SIGTERM to the main process
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _pai(tmp: Path, *args: str) -> str:
    env = {**os.environ, "PAI_CONFIG": str(tmp / "cli.json"), "HOME": str(tmp / "home")}
    r = subprocess.run([str(PAI_SCRIPT), *args], capture_output=True, text=True, timeout=60, env=env, cwd=tmp)
    assert r.returncode == 0, f"pai {shlex.join(args)}: {r.stdout}{r.stderr}"
    return r.stdout


def _healthcheck(port: int) -> int:
    """The master image's HEALTHCHECK command, pointed at ``port``."""
    _, command = healthcheck(parse(ROOT / "deploy" / "docker" / "Dockerfile").stages["master"].one("HEALTHCHECK"))
    command = [c.replace(":9186/", f":{port}/") for c in command]
    return subprocess.run(command, capture_output=True, timeout=30).returncode


async def test_the_systemd_units_run_a_postgresql_cluster_that_runs_the_hello_example(tmp_path: Path) -> None:
    etc, state = tmp_path / "etc" / "pai", tmp_path / "var" / "lib"
    etc.mkdir(parents=True)
    port, password, token = _free_port("127.0.0.1"), secrets.token_urlsafe(12), secrets.token_urlsafe(24)
    url = f"http://127.0.0.1:{port}"
    sample_opts = parse_env_file(MASTER_ENV.read_text())["PAI_MASTER_OPTS"]
    with fresh_database() as database_url, ExitStack() as stack:
        (etc / "master.env").write_text(edit(MASTER_ENV.read_text(), {
            "PAI_MASTER_HOST": "127.0.0.1", "PAI_MASTER_PORT": str(port), "PAI_DATABASE_URL": database_url,
            "PAI_ADMIN_PASSWORD": password, "PAI_AGENT_TOKEN": token,
            "PAI_MASTER_OPTS": f"{sample_opts} --node-timeout {NODE_TIMEOUT}"}))
        (etc / "agent.env").write_text(edit(AGENT_ENV.read_text(), {
            "PAI_MASTER_URL": url, "PAI_AGENT_TOKEN": token, "PAI_AGENT_RUNTIME": "process"}))
        for node, address in AGENTS.items():  # two agents on one machine: an address and a log port each
            (etc / f"agent-{node}.env").write_text(edit("", {
                "PAI_AGENT_ADDRESS": address, "PAI_AGENT_LOG_PORT": str(_free_port(address))}))

        started: list[Started] = []
        stack.callback(_kill_all, started)
        stack.callback(_kill_leftovers, state)
        master = Started("pai-master", service(MASTER_UNIT, etc, state), tmp_path)
        started.append(master)
        api = MasterApi(HttpClient(url, timeout=10))

        def healthy() -> Any:
            master.alive()
            try:
                return api.http.json("GET", "/healthz")
            except CliError:
                return None

        await eventually(healthy, timeout=60, what="the master's /healthz")
        assert _healthcheck(port) == 0  # the image's HEALTHCHECK passes against a running master
        assert _healthcheck(_free_port("127.0.0.1")) != 0  # and fails where none runs

        agents = [Started(f"pai-agent@{node}", service(AGENT_UNIT, etc, state, node), tmp_path) for node in AGENTS]
        started.extend(agents)
        _pai(tmp_path, "login", "--master", url, "--user", "admin", "--password", password)
        api.http.token = api.login("admin", password)["token"]

        def nodes_ready() -> dict[str, str] | None:
            for s in started:
                s.alive()
            ready = {n["name"]: n["address"] for n in api.nodes() if n["state"] == "READY"}
            return ready if ready.keys() == AGENTS.keys() else None

        assert await eventually(nodes_ready, timeout=60, what="both agents READY") == AGENTS
        assert _pai(tmp_path, "nodes").count("READY") == 2

        key = _pai(tmp_path, "submit", str(ROOT / "examples" / "hello-v1.json")).strip()
        assert key == "admin~hello-v1"

        def ended() -> dict[str, Any] | None:
            detail = api.job(key)
            return detail if detail["jobStatus"]["state"] in ("SUCCEEDED", "FAILED", "STOPPED") else None

        detail = await eventually(ended, timeout=120, what=f"{key} to end")
        assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
        for role, index in (("ps", 0), ("worker", 0), ("worker", 1)):
            out = _pai(tmp_path, "logs", key, "--role", role, "--index", str(index))
            assert f"role={role} index={index} workers=" in out  # served by the agent's log server, via the master

        # The master kept everything in the PostgreSQL database named in /etc/pai/master.env.
        engine = create_engine(normalize_url(database_url))
        try:
            with engine.connect() as c:
                assert c.execute(text("SELECT count(*) FROM jobs")).scalar() == 1
                assert c.execute(text("SELECT count(*) FROM nodes")).scalar() == len(AGENTS)
        finally:
            engine.dispose()

        # systemctl stop pai-agent@node-a pai-agent@node-b pai-master
        for agent in agents:
            agent.stop()
        for agent in agents:
            await eventually(agent.exited, timeout=30, what=f"{agent.name} to exit")
            assert agent.proc.returncode == 0, agent.output()[-3000:]
        watchdogs = [pid for pid in processes_with(str(state)) if pid not in {a.proc.pid for a in agents}]
        assert len(watchdogs) == len(AGENTS)  # KillMode=process: the stopped agents' watchdogs still guard the node
        master.stop()
        await eventually(master.exited, timeout=60, what="the master to exit")
        assert master.proc.returncode == 0, master.output()[-3000:]
        # Nothing is left: each agent's lease watchdog exits once the lease has run out with its agent gone.
        await eventually(lambda: not processes_with(str(state)), timeout=float(NODE_TIMEOUT) * 3,
                         what="the lease watchdogs to exit")
        assert "Traceback" not in master.output() + "".join(a.output() for a in agents)


def _kill_all(started: list[Started]) -> None:
    for s in started:
        s.kill()


def _kill_leftovers(state: Path) -> None:
    """Processes of this test's cluster still running after a failure (the watchdogs, tasks): SIGKILL, by pid."""
    for pid in processes_with(str(state)):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
