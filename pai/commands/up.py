"""``pai up``: an embedded cluster on this machine (master on SQLite + one local agent + an admin user).

Ctrl-C (or the end of ``--run``) stops the agent, which kills its tasks, then the master: no process is
left behind. A job's codeDir may be a local path under the current directory, the ``--run`` file's directory and
each ``--local-path`` (the cluster configuration's ``localPaths``, written to ``<data-dir>/up-cluster.json``).
``--run`` takes a job or an experiment (``type: experiment``: created, followed until it ends, its trials printed).
The terminal gets the URL, the admin's password, the runtime and the log file (pai.commands.upprocs: the master's
and the agent's lines go there; ``-v`` shows them too); ``pai up`` exits 3 when its master or agent dies.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from pai.cli.api import MasterApi
from pai.cli.command import ClientCommand
from pai.cli.config import CliConfig, config_path, save_config
from pai.cli.errors import CliError
from pai.cli.http import HttpClient
from pai.commands.logs import setup_logging
from pai.commands.upprocs import LOG_NAME, Children, LogEcho
from pai.commands.uprun import run_and_follow
from pai.nodeagent.docker_runtime import engine_answers
from pai.store.db import default_data_dir
from pai.store.private import private_dir, restrict, write_private

log = logging.getLogger("pai.up")


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


def _choose_runtime(asked: str) -> tuple[str, str]:
    """The agent's runtime and why, in words: docker where an engine answers (unless asked otherwise)."""
    if asked == "process":
        return asked, "process (asked for): tasks run as processes on this machine; images are not used"
    why_not = engine_answers()
    where = os.environ.get("DOCKER_HOST") or "the default socket"
    if why_not is None:
        return "docker", f"docker: a Docker Engine answers at {where}; tasks run in their images"
    if asked == "docker":
        raise click.ClickException(f"--runtime docker: no Docker Engine answers at {where}: {why_not}")
    return "process", (f"process: no Docker Engine answers at {where}, so tasks run as processes on this machine "
                       "and their images are not used")


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


def _wait_until(what: str, probe: Callable[[], object], timeout: float, children: Children) -> None:
    """Until ``probe`` answers something true; a child that exits meanwhile ends the wait (ClusterDiedError)."""
    for _ in range(int(timeout / 0.2)):
        try:
            if probe():
                return
        except CliError:
            pass
        children.sleep(0.2)
    raise click.ClickException(f"{what}: not ready after {timeout:.0f}s; see {children.log}")


def _cluster_config(data_dir: Path, local_paths: Sequence[Path]) -> Path:
    """The configuration the master starts with: its ``localPaths``, the directories a codeDir may be under."""
    path = data_dir / "up-cluster.json"
    roots = list(dict.fromkeys(str(p.resolve()) for p in local_paths))
    path.write_text(json.dumps({"localPaths": [{"path": r} for r in roots]}, indent=2) + "\n")
    return path


@contextmanager
def _cluster(host: str, port: int, data_dir: Path, agent_flags: list[str],
             local_paths: Sequence[Path] = ()) -> Iterator[tuple[str, str, Children]]:
    password, token = _credentials(data_dir)
    config = _cluster_config(data_dir, local_paths)
    env = {**os.environ, "PAI_ADMIN_PASSWORD": password, "PAI_AGENT_TOKEN": token}
    url = f"http://{host}:{port}"
    py = [sys.executable, "-P", "-m", "pai"]  # -P: a pai/ in the working directory is not ours
    children = Children(data_dir / LOG_NAME)
    try:
        children.start("master", [*py, "master", "--host", host, "--port", str(port), "--data-dir", str(data_dir),
                                  "--vc-config", str(config)], env)
        api = MasterApi(HttpClient(url, timeout=5))
        _wait_until("master", lambda: api.http.json("GET", "/healthz"), 30, children)
        login = api.login("admin", password)
        api.http.token = login["token"]
        children.start("agent", [*py, "agent", "--master", url, "--name", "local", "--address", host,
                                 "--work-dir", str(data_dir / "agent"), "--kill-on-exit", *agent_flags], env)
        _wait_until("agent", lambda: any(n["state"] == "READY" for n in api.nodes()), 30, children)
        log.info("cluster up", extra={"url": url, "dataDir": str(data_dir),
                                      "localPaths": ",".join(str(p.resolve()) for p in local_paths)})
        yield url, password, children
    finally:
        children.stop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM, SIGHUP: stop everything as Ctrl-C does


@contextmanager
def _logging(data_dir: Path, verbose: bool) -> Iterator[None]:
    """This process's log lines to the log file; with ``verbose`` the whole file's new lines to stderr too."""
    private_dir(data_dir)
    path = data_dir / LOG_NAME
    with path.open("a", encoding="utf-8") as stream:
        start = stream.tell()
        setup_logging("up", stream)
        echo = LogEcho(path, start) if verbose else None
        try:
            yield
        finally:
            if echo is not None:
                echo.close()
            logging.getLogger().handlers.clear()


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
@click.option("--timeout", type=click.FloatRange(min=0), metavar="SECONDS", default=None,
              help="With --run: give up waiting after this long and exit 124 (default: 600 for a job, 1800 for an "
                   "experiment).")
@click.option("-v", "--verbose", is_flag=True, help="Show the master's and the agent's log lines here too.")
def up(host: str, port: int | None, data_dir: Path | None, run_file: Path | None, runtime: str, gpus: int | None,
       cpus: int | None, memory_mb: int | None, local_paths: tuple[Path, ...], timeout: float | None,
       verbose: bool) -> None:
    """Run an embedded cluster: a master on SQLite, one local agent and an admin user.

    Prints the URL, the admin's password, the runtime and the log file, where the master and the agent write
    (-v: shown here too). Ctrl-C or SIGTERM stops everything.

    \b
    Exit codes:
      0    stopped with Ctrl-C or SIGTERM; with --run: the job SUCCEEDED (the experiment COMPLETED)
      1    with --run: the job ended otherwise (FAILED, STOPPED); or an error (a bad spec, a taken port)
      3    the master or the agent died; the log's last lines are printed
      124  with --run: --timeout ran out before the job ended
    """
    roots = [Path.cwd(), *([run_file.parent] if run_file is not None else []), *local_paths]
    runtime, why = _choose_runtime(runtime)
    if cpus is None:
        # The process runtime does not pin CPUs: the embedded cluster offers 4 slots per core so that a
        # small distributed job (e.g. examples/hello-v1.json, 3 tasks) fits on a 2-core laptop.
        cpus = 4 * len(os.sched_getaffinity(0))
    flags: list[str] = ["--runtime", runtime]
    for name, value in (("--gpus", gpus), ("--cpus", cpus), ("--memory-mb", memory_mb)):
        if value is not None:
            flags += [name, str(value)]
    port = port or (_free_port(host) if run_file is not None else 9186)
    _require_free_port(host, port)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    click.echo(f"runtime: {why}")
    if run_file is not None:
        with tempfile.TemporaryDirectory(prefix="pai-up-") as tmp:
            chosen = data_dir or Path(tmp)
            gone = "" if data_dir else " (deleted with the throwaway data directory; --data-dir DIR keeps it)"
            click.echo(f"logs: {chosen / LOG_NAME}{gone}")
            with _logging(chosen, verbose), _cluster(host, port, chosen, flags, roots) as (url, password, children):
                code = run_and_follow(url, password, run_file, timeout, children)
        sys.exit(code)
    chosen = data_dir or default_data_dir()
    click.echo(f"logs: {chosen / LOG_NAME}" + ("" if verbose else " (pai up -v: here too)"))
    with _logging(chosen, verbose), _cluster(host, port, chosen, flags, roots) as (url, password, children):
        token = MasterApi(HttpClient(url)).login("admin", password)["token"]
        save_config(config_path(os.environ), CliConfig(master=url, user="admin", token=token))
        click.echo(f"pai is up at {url}\n  user: admin\n  password: {password}\n"
                   "The CLI is logged in as admin. Ctrl-C stops everything.")
        try:
            while True:
                children.sleep(1.0)
        except KeyboardInterrupt:
            click.echo("stopping...")
