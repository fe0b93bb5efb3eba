"""``pai exec [-i] [-t] JOB [--role R] [--index I] -- CMD...``: a command in a running task, through the master.

The session itself (aiohttp's WebSocket, the local terminal) is in ``pai.cli.execsession``, imported when the command
runs: the other commands do not wait for aiohttp's import.
"""

from __future__ import annotations

import click

from pai.cli.command import client_command, connect, master_option


@client_command("exec")
@click.option("-i", "--stdin", "interactive", is_flag=True, help="Pass our stdin to the command.")
@click.option("-t", "--tty", "tty", is_flag=True, help="Give the command a terminal (with -i: an interactive shell).")
@click.option("--role", metavar="ROLE", help="Task role (default: the job's first role).")
@click.option("--index", type=click.IntRange(min=0), default=0, show_default=True, help="Task index in the role.")
@click.argument("name")
@click.argument("command", nargs=-1, required=True)
@master_option
def exec_command(interactive: bool, tty: bool, role: str | None, index: int, name: str, command: tuple[str, ...],
                 master: str | None) -> None:
    """Run COMMAND in a running task of job NAME.

    Its output comes here as it is written; the exit code is the command's. Put the command after --:
    ``pai exec -it myjob -- bash``, ``pai exec myjob --role worker --index 1 -- nvidia-smi -L``. Only the job's
    owner and admins may; every session is in the job's events.
    """
    conn = connect(master)
    key, role = conn.task_role(name, role)
    from pai.cli.execsession import run_exec

    code = run_exec(conn, key, role, index, command, interactive, tty)
    raise click.exceptions.Exit(code)
