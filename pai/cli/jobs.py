"""Job commands: ``pai jobs``, ``pai job show|config``, ``pai logs``, ``pai stop``."""

from __future__ import annotations

import json

import click

from pai.cli.command import ClientCommand, client_command, connect, master_option
from pai.cli.errors import CliError
from pai.cli.follow import follow as follow_log
from pai.cli.follow import since_value
from pai.cli.jobview import render_job_detail, render_job_list
from pai.cli.output import OutputFormat, output_option
from pai.domain import JobState

DEFAULT_LIMIT = 50


@client_command("jobs")
@click.option("--user", "user", metavar="USER", help="Jobs of this user (default: yours).")
@click.option("--all", "all_users", is_flag=True, help="Jobs of every user.")
@click.option("--vc", metavar="VC", help="Only jobs in this virtual cluster.")
@click.option("--state", type=click.Choice([s.value for s in JobState], case_sensitive=False),
              help="Only jobs in this state.")
@click.option("--keyword", metavar="TEXT", help="Only jobs whose name contains TEXT.")
@click.option("--limit", type=click.IntRange(min=1), default=DEFAULT_LIMIT, show_default=True,
              help="At most this many jobs, newest first.")
@output_option
@master_option
def list_jobs(
    user: str | None,
    all_users: bool,
    vc: str | None,
    state: str | None,
    keyword: str | None,
    limit: int,
    output: OutputFormat,
    master: str | None,
) -> None:
    """List jobs (yours by default), newest first."""
    if all_users and user:
        raise click.UsageError("--all and --user exclude each other")
    conn = connect(master)
    from pai.cli.api import JobFilters

    filters = JobFilters(
        username=None if all_users else (user or conn.session.user),
        vc=vc,
        state=state.upper() if state else None,
        keyword=keyword,
        limit=limit,
    )
    answer = conn.api.list_jobs(filters, with_total=output is OutputFormat.TABLE)
    output.emit(answer, render_job_list)


@click.group("job")
def job() -> None:
    """Look at one job."""


@job.command("show", cls=ClientCommand)
@click.argument("name")
@output_option
@master_option
def show_job(name: str, output: OutputFormat, master: str | None) -> None:
    """Show a job's status, tasks, events, and the URL of each port of its running tasks through the master.

    NAME is user~job, or just job for one of yours.
    """
    conn = connect(master)
    output.emit(conn.api.job(conn.job_key(name)), lambda detail: render_job_detail(detail, conn.session.master))


@job.command("config", cls=ClientCommand)
@click.argument("name")
@output_option
@master_option
def show_config(name: str, output: OutputFormat, master: str | None) -> None:
    """Print the config a job was submitted with.

    As submitted, secrets masked; -o json converts it to JSON.
    """
    conn = connect(master)
    text = conn.api.job_config(conn.job_key(name))
    if output is OutputFormat.TABLE:
        click.echo(text, nl=not text.endswith("\n"))
        return
    import yaml  # imported when a config is converted: the other commands do not wait for it

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CliError(f"the config of {name} is neither JSON nor YAML: {exc}") from None
    click.echo(json.dumps(doc, indent=2, default=str))


@client_command("logs")
@click.argument("name")
@click.option("--role", metavar="ROLE", help="Task role (default: the job's first role).")
@click.option("--index", type=click.IntRange(min=0), default=0, show_default=True, help="Task index in the role.")
@click.option("--stderr", "stderr", is_flag=True, help="Show stderr instead of stdout.")
@click.option("--tail", type=click.IntRange(min=1), metavar="BYTES", help="Only the last BYTES bytes.")
@click.option("--attempt", metavar="ATTEMPT_ID", help="An earlier attempt (ids: pai job show, or /attempts).")
@click.option("-f", "--follow", is_flag=True,
              help="Follow the output as it is written, across the task's attempts, until the task ends.")
@click.option("--since", metavar="TIME",
              help="With -f: the attempts that ran in the last TIME (30s, 10m, 2h, 1d) or since an ISO 8601 time, "
                   "each whole (logs have no time per line).")
@master_option
def logs(name: str, role: str | None, index: int, stderr: bool, tail: int | None, attempt: str | None,
         follow: bool, since: str | None, master: str | None) -> None:
    """Show the output of a task.

    The latest attempt of task INDEX of ROLE of job NAME, or the attempt ATTEMPT_ID. With -f, the output as it is
    written from the latest attempt on (--tail: of that attempt), a line ``==> attempt N ... <==`` before each
    new attempt, until the task ends; then how it ended on stderr, exit code 0.
    """
    if not follow and since is not None:
        raise click.UsageError("--since goes with -f")
    if follow and attempt is not None:
        raise click.UsageError("-f follows the latest attempt on; it does not take --attempt")
    since = since_value(since)
    conn = connect(master)
    key, role = conn.task_role(name, role)
    if follow:
        follow_log(conn.api, key, role, index, "stderr" if stderr else "stdout", tail, since)
        return
    text = conn.api.task_log(key, role, index, "stderr" if stderr else "stdout", tail, attempt)
    click.echo(text, nl=False)


@client_command("stop")
@click.argument("name")
@master_option
def stop(name: str, master: str | None) -> None:
    """Stop a job.

    Its tasks get SIGTERM, then are killed after the grace period. Exits 0 once the stop is accepted, and
    also when the job had already ended (it says so, and nothing changes); 1 on an error.
    """
    conn = connect(master)
    key = conn.job_key(name)
    answer = conn.api.stop_job(key)
    click.echo(str(answer.get("message") or f"stopping {key}"))
