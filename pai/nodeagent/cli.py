"""``pai agent``: run the node agent of this machine until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from pathlib import Path

import click

from pai.nodeagent.address import node_address
from pai.nodeagent.agent import RUNTIMES, Agent, AgentConfig
from pai.nodeagent.codefetch import DEFAULT_MAX_BYTES
from pai.nodeagent.health import DEFAULT_MIN_FREE_DISK_MB
from pai.nodeagent.logcap import DEFAULT_MAX_LOG_MB, DEFAULT_MAX_TASK_LOG_MB
from pai.nodeagent.logfmt import configure
from pai.nodeagent.masters import parse_urls


def _labels(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    labels = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not key=value", ctx=ctx, param=param)
        labels[key] = value
    return labels


def _masters(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        parse_urls(value)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from e
    return value


@click.command("agent")
@click.option("--master", "master_url", envvar="PAI_MASTER_URL", required=True, callback=_masters,
              help="The masters' base URLs, comma-separated: the agent follows the leader among them.")
@click.option("--name", default=socket.gethostname, show_default="host name", help="This node's name.")
@click.option("--address", default="", show_default="127.0.0.1 when every master is on this machine",
              help="This machine's cluster IP: the tasks and the log server use it. Required with a master elsewhere.")
@click.option("--gpus", type=click.IntRange(min=0), help="GPU count (default: detected by NVML, else 0).")
@click.option("--cpus", type=click.IntRange(min=1), help="CPU count (default: detected).")
@click.option("--memory-mb", type=click.IntRange(min=1), help="Memory in MB (default: detected).")
@click.option("--gpu-type", help="GPU type, e.g. A100 (default: NVML's device name).")
@click.option("--label", "labels", multiple=True, callback=_labels, help="A node label k=v (repeatable).")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), help="Default: ~/.pai/agent/<name>.")
@click.option("--log-port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0 picks a free port.")
@click.option("--runtime", type=click.Choice(RUNTIMES), default="auto", show_default=True,
              help="docker: containers (a Docker Engine); process: host processes (laptops, tests); "
                   "auto: docker where an engine answers.")
@click.option("--docker-host", envvar="DOCKER_HOST", help="The Docker Engine (default: DOCKER_HOST, else its socket).")
@click.option("--heartbeat", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="Seconds between heartbeats until the master sets it.")  # fmt: skip
@click.option("--token", envvar="PAI_AGENT_TOKEN",
              help="The master's agent token (the master keeps it in <data-dir>/agent-token).")
@click.option("--token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Read the agent token from this file (e.g. a copy of the master's <data-dir>/agent-token).")
@click.option("--kill-on-exit", is_flag=True, help="Stop every task when the agent exits (default: leave them).")
@click.option("--kill-grace", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="Seconds between SIGTERM and SIGKILL with --kill-on-exit.")  # fmt: skip
@click.option("--code-max-mb", type=click.IntRange(min=1), default=DEFAULT_MAX_BYTES >> 20, show_default=True,
              help="Largest codeDir copied, in MB.")  # fmt: skip
@click.option("--min-free-disk-mb", type=click.IntRange(min=0), default=DEFAULT_MIN_FREE_DISK_MB, show_default=True,
              help="Below this much free space in the work directory the node takes no new tasks.")
@click.option("--max-log-mb", type=click.IntRange(min=1), default=DEFAULT_MAX_LOG_MB, show_default=True,
              help="Cap of each log file of a task on disk; past it, older output is moved aside once, then dropped.")
@click.option("--max-task-log-mb", type=click.IntRange(min=1), default=DEFAULT_MAX_TASK_LOG_MB, show_default=True,
              envvar="PAI_AGENT_MAX_TASK_LOG_MB",
              help="Share of the disk all the log files of one task may keep together; past it, older output is "
                   "dropped and counted.")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def agent(
    master_url: str,
    name: str,
    address: str,
    gpus: int | None,
    cpus: int | None,
    memory_mb: int | None,
    gpu_type: str | None,
    labels: dict[str, str],
    work_dir: Path | None,
    log_port: int,
    runtime: str,
    docker_host: str | None,
    heartbeat: float,
    token: str | None,
    token_file: Path | None,
    kill_on_exit: bool,
    kill_grace: float,
    code_max_mb: int,
    min_free_disk_mb: int,
    max_log_mb: int,
    max_task_log_mb: int,
    verbose: bool,
) -> None:
    """Run the node agent: register with the master, run the tasks it sends, serve their logs."""
    configure(logging.DEBUG if verbose else logging.INFO)
    if token_file is not None:
        token = token_file.read_text().strip()
    if not token:
        raise click.UsageError("the master's agent token is required: --token, PAI_AGENT_TOKEN or --token-file "
                               "(the master keeps it in <data-dir>/agent-token)")
    masters = parse_urls(master_url)
    try:
        address = node_address(address, masters)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    config = AgentConfig(
        masters=masters,
        name=name,
        address=address,
        work_dir=work_dir or Path.home() / ".pai" / "agent" / name,
        gpus=gpus,
        cpus=cpus,
        memory_mb=memory_mb,
        gpu_type=gpu_type,
        labels=labels,
        log_port=log_port,
        runtime=runtime,
        docker_host=docker_host,
        heartbeat_seconds=heartbeat,
        token=token,
        token_file=token_file,
        kill_on_exit=kill_on_exit,
        kill_grace_seconds=kill_grace,
        code_max_bytes=code_max_mb << 20,
        min_free_disk_mb=min_free_disk_mb,
        max_log_bytes=max_log_mb << 20,
        max_task_log_bytes=max_task_log_mb << 20,
    )
    asyncio.run(_run(Agent(config)))


async def _run(node_agent: Agent) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, node_agent.request_stop)
    await node_agent.run()
