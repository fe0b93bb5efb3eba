"""``pai up``: an embedded cluster on this machine (master on SQLite + one local agent + an admin user).

Ctrl-C (or the end of ``--run``) stops the agent, which kills its tasks, then the master: no process is
left behind. A job's codeDir may be a local path under the current directory, the ``--run`` file's directory and
each ``--local-path`` (the cluster configuration's ``localPaths``, written to ``<data-dir>/up-cluster.json``).
``--run`` takes a job or an experiment (``type: experiment``: created, followed until it ends, its trials printed).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from pai.cli.api import MasterApi
from pai.cli.command import ClientCommand
from pai.cli.config import CliConfig, config_path, save_config
from pai.cli.errors import CliError
from pai.cli.experiments import content_type, is_experiment
from pai.cli.experimentview import render_experiment
from pai.cli.http import HttpClient
from pai.cli.submit import echo_warnings, prepare_spec, wait_for_job
from pai.commands.logs import setup_logging
from pai.nodeagent.docker_runtime import engine_answers
from pai.store.db import default_data_dir
from pai.store.private import private_dir, restrict, write_private

EXPERIMENT_TIMEOUT = 1800.0  # seconds --run follows an experiment before it gives up (and stops everything)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _require_free_port(host: str, port: int) -> None:
    """Fail with a plain message when ``port`` is taken, naming the pai master that holds it if it is one."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the master binds: TIME_WAIT is no conflict
        try:
            s.bind((host, port))
            return
        except OSError:
            pass
    url = f"http://{host}:{port}"
    try:
        info = HttpClient(url, timeout=3).json("GET", "/api/v2/info")
    except CliError:
        info = None
    if isinstance(info, dict) and info.get("name") == "pai":
        where = f" (data directory {info['dataDir']})" if info.get("dataDir") else ""
        raise click.ClickException(
            f"port {port} is taken by a pai master that is already running at {url}{where}. Use it "
            f"(pai login --master {url}), stop it, or start another cluster with pai up --port N --data-dir DIR.")
    raise click.ClickException(f"port {port} on {host} is in use by another program; choose another: pai up --port N")


def _choose_runtime(asked: str) -> str:
    """The agent's runtime, said in one line: docker where an engine answers (unless asked otherwise)."""
    if asked == "process":
        click.echo("runtime: process (asked for): tasks run as processes on this machine; images are not used")
        return asked
    why_not = engine_answers()
    where = os.environ.get("DOCKER_HOST") or "the default socket"
    if why_not is None:
        click.echo(f"runtime: docker: a Docker Engine answers at {where}; tasks run in their images")
        return "docker"
    if asked == "docker":
        raise click.ClickException(f"--runtime docker: no Docker Engine answers at {where}: {why_not}")
    click.echo(f"runtime: process: no Docker Engine answers at {where}, so tasks run as processes on this "
               "machine and their images are not used")
    return "process"


def _credentials(data_dir: Path) -> tuple[str, str]:
    """The admin password and agent token of this data directory: from the environment, else kept in a
    0600 file so that a second ``pai up`` on the same directory logs in with the same password."""
    path = data_dir / "up-credentials"
    private_dir(data_dir)
    if path.exists():
        restrict(path)  # one left wider by an older version
        stored = path.read_text().split()
        password, token = stored[0], stored[1]
    else:
        password, token = secrets.token_urlsafe(12), secrets.token_urlsafe(24)
        write_private(path, f"{password}\n{token}\n")
    return os.environ.get("PAI_ADMIN_PASSWORD", password), os.environ.get("PAI_AGENT_TOKEN", token)


def _wait_until(what: str, probe: Callable[[], object], timeout: float, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise click.ClickException(f"{what}: a process exited early ({p.returncode}); see its log above")
        try:
            if probe():
                return
        except CliError:
            pass
        time.sleep(0.2)
    raise click.ClickException(f"{what}: not ready after {timeout:.0f}s")


def _cluster_config(data_dir: Path, local_paths: Sequence[Path]) -> Path:
    """The configuration the master starts with: its ``localPaths``, the directories a codeDir may be under."""
    path = data_dir / "up-cluster.json"
    roots = list(dict.fromkeys(str(p.resolve()) for p in local_paths))
    path.write_text(json.dumps({"localPaths": [{"path": r} for r in roots]}, indent=2) + "\n")
    return path


@contextmanager
def _cluster(host: str, port: int, data_dir: Path, agent_flags: list[str],
             local_paths: Sequence[Path] = ()) -> Iterator[tuple[str, str]]:
    _require_free_port(host, port)
    password, token = _credentials(data_dir)
    config = _cluster_config(data_dir, local_paths)
    env = {**os.environ, "PAI_ADMIN_PASSWORD": password, "PAI_AGENT_TOKEN": token}
    url = f"http://{host}:{port}"
    py = [sys.executable, "-m", "pai"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(subprocess.Popen([*py, "master", "--host", host, "--port", str(port),
                                       "--data-dir", str(data_dir), "--vc-config", str(config)], env=env))
        api = MasterApi(HttpClient(url, timeout=5))
        _wait_until("master", lambda: api.http.json("GET", "/healthz"), 30, procs)
        login = api.login("admin", password)
        api.http.token = login["token"]
        procs.append(subprocess.Popen([*py, "agent", "--master", url, "--name", "local", "--address", host,
                                       "--work-dir", str(data_dir / "agent"), "--kill-on-exit", *agent_flags],
                                      env=env))
        _wait_until("agent", lambda: any(n["state"] == "READY" for n in api.nodes()), 30, procs)
        yield url, password
    finally:
        for p in reversed(procs):  # the agent first: it kills its tasks on the way out
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def _run(url: str, password: str, file: Path) -> int:
    api = MasterApi(HttpClient(url))
    api.http.token = api.login("admin", password)["token"]
    text = file.read_text()
    if is_experiment(text):
        return _run_experiment(api, text, file)
    spec = prepare_spec(text, str(file))
    answer = api.submit(spec.body, spec.content_type)
    key = answer["jobName"]
    click.echo(f"submitted {key}")
    echo_warnings(answer)
    detail = wait_for_job(lambda: api.job(key), key=key, timeout=600, interval=0.5,
                          on_change=lambda d: click.echo(f"{key}: {d['jobStatus']['state']}"))
    for role, info in detail["taskRoles"].items():
        for t in info["taskStatuses"]:
            out = api.task_log(key, role, t["taskIndex"], "stdout")
            click.echo(f"--- {role}[{t['taskIndex']}] on {t['containerIp']} exit {t['containerExitCode']}")
            click.echo(out.rstrip("\n"))
    state = detail["jobStatus"]["state"]
    click.echo(f"{key}: {state}")
    return 0 if state == "SUCCEEDED" else 1


def _run_experiment(api: MasterApi, text: str, file: Path) -> int:
    """An experiment: created, followed until it ends (its trials' states as they change), then its trials' table."""
    key = api.create_experiment(text.encode(), content_type(text, str(file)))["experimentName"]
    click.echo(f"created experiment {key}")
    seen: dict[int, str] = {}
    deadline = time.monotonic() + EXPERIMENT_TIMEOUT
    while True:
        detail = api.experiment(key)
        for trial in detail["trials"]:
            state = trial["state"] + (" (searcher)" if trial.get("stoppedBy") == "searcher" else "")
            if seen.get(trial["number"]) != state:
                seen[trial["number"]] = state
                click.echo(f"{key}: trial {trial['number']} {state}  {json.dumps(trial['hparams'], sort_keys=True)}")
        if detail["state"] in ("COMPLETED", "STOPPED") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    click.echo(render_experiment(detail))
    click.echo(f"{key}: {detail['state']}")
    return 0 if detail["state"] == "COMPLETED" else 1


@click.command("up", cls=ClientCommand)  # a refused spec is one "error: ..." line, not a traceback
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=None, type=int,
              help="Master port (default 9186; with --run, any free port).")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Data directory (default: PAI_DATA_DIR or ~/.local/share/pai; a throwaway one with --run).")
@click.option("--run", "run_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Submit FILE (a job, or an experiment: type: experiment), wait for it to end, print its tasks' "
                   "output (an experiment: its trials), then stop everything.")
@click.option("--runtime", type=click.Choice(("auto", "docker", "process")), default="auto", show_default=True,
              help="The local agent's runtime: docker where a Docker Engine answers, else process.")
@click.option("--gpus", type=int, default=None, help="GPUs of the local agent (default: detected, else 0).")
@click.option("--cpus", type=int, default=None, help="CPU slots of the local agent (default: 4 per core).")
@click.option("--memory-mb", type=int, default=None, help="Memory of the local agent (default: detected).")
@click.option("--local-path", "local_paths", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="A directory a job's codeDir may be under, besides the current directory and the --run file's "
                   "(repeatable).")
def up(host: str, port: int | None, data_dir: Path | None, run_file: Path | None, runtime: str, gpus: int | None,
       cpus: int | None, memory_mb: int | None, local_paths: tuple[Path, ...]) -> None:
    """Run an embedded cluster: a master on SQLite, one local agent and an admin user."""
    setup_logging("up")
    roots = [Path.cwd(), *([run_file.parent] if run_file is not None else []), *local_paths]
    runtime = _choose_runtime(runtime)
    if cpus is None:
        # The process runtime does not pin CPUs: the embedded cluster offers 4 slots per core so that a
        # small distributed job (e.g. examples/hello-v1.json, 3 tasks) fits on a 2-core laptop.
        cpus = 4 * len(os.sched_getaffinity(0))
    flags: list[str] = ["--runtime", runtime]
    for name, value in (("--gpus", gpus), ("--cpus", cpus), ("--memory-mb", memory_mb)):
        if value is not None:
            flags += [name, str(value)]
    if run_file is not None:
        with tempfile.TemporaryDirectory(prefix="pai-up-") as tmp:
            chosen = data_dir or Path(tmp)
            with _cluster(host, port or _free_port(host), chosen, flags, roots) as (url, password):
                code = _run(url, password, run_file)
        sys.exit(code)
    chosen = data_dir or default_data_dir()
    with _cluster(host, port or 9186, chosen, flags, roots) as (url, password):
        token = MasterApi(HttpClient(url)).login("admin", password)["token"]
        save_config(config_path(os.environ), CliConfig(master=url, user="admin", token=token))
        click.echo(f"pai is up at {url}\n  user: admin\n  password: {password}\n"
                   f"  data: {chosen}\n  the CLI is logged in (pai submit examples/hello-v1.json).\n"
                   f"  codeDir may be under: {', '.join(str(r.resolve()) for r in roots)} (more: --local-path)\n"
                   "Press Ctrl-C to stop everything.")
        stop = False

        def _handle(signum: int, frame: object) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, _handle)
        try:
            while not stop:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        click.echo("stopping...")
