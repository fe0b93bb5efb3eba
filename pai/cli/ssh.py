"""``pai ssh JOB``: SSH into a running task through the master, with your own key (``pai ssh-key add``).

Every task is served an SSH endpoint by its node's agent (no sshd in the image needed) on its ``ssh`` port; the
client reaches it through the master's tunnel (``GET {job}/tasks/{role}/{index}/ports/ssh/tunnel``), so the node's
ports need not be reachable from here. ``pai ssh`` runs ``ssh`` with this command as its ``ProxyCommand`` (``--proxy``:
stdin and stdout piped through the tunnel); ``--config`` prints the ``~/.ssh/config`` entry that does the same for
any SSH client (VS Code Remote-SSH: connect to the entry's host).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys

import click

from pai.cli.command import client_command, connect, master_option
from pai.cli.errors import CliError
from pai.cli.urls import tunnel_path

ALIVE_SECONDS = 30  # an idle session still moves bytes this often (a tunnel's idle timeout does not end it)


def host_alias(key: str, role: str, index: int) -> str:
    """The name ssh knows a task by (its config's ``Host``, its known_hosts entry): ``pai-<user>-<job>-<role>-<i>``"""
    return f"pai-{key.replace('~', '-')}-{role}-{index}"


def pai_command() -> list[str]:
    """How ssh's ProxyCommand runs: this Python, ``pai.cli.sshproxy`` alone (the standard library only: ``pai`` itself
    imports click, aiohttp and the server commands, which every SSH connection would wait for). ``-P``: not the
    working directory first on sys.path (ssh runs it where the user is, which may hold a ``pai/`` of its own)."""
    return [sys.executable, "-P", "-m", "pai.cli.sshproxy"]


def proxy_command(key: str, role: str, index: int, master: str | None) -> str:
    """The ProxyCommand line (``%`` doubled: ssh expands its own ``%`` tokens in it)."""
    words = [*pai_command(), key, "--role", role, "--index", str(index), "--proxy",
             *(["--master", master] if master else [])]
    return shlex.join(words).replace("%", "%%")


def config_entry(key: str, role: str, index: int, master: str | None) -> str:
    alias = host_alias(key, role, index)
    return (f"Host {alias}\n  HostName {alias}\n  User root\n  ProxyCommand {proxy_command(key, role, index, master)}\n"
            f"  HostKeyAlias {alias}\n  StrictHostKeyChecking accept-new\n  ServerAliveInterval {ALIVE_SECONDS}\n")


@client_command("ssh", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.option("--role", metavar="ROLE", help="Task role (default: the job's first role).")
@click.option("--index", type=click.IntRange(min=0), default=0, show_default=True, help="Task index in the role.")
@click.option("--config", "config", is_flag=True, help="Print a ~/.ssh/config entry for the task instead.")
@click.option("--proxy", is_flag=True, help="Be ssh's ProxyCommand: pipe stdin and stdout through the tunnel.")
@click.argument("ssh_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- SSH ARGS...]")
@master_option
def ssh(name: str, role: str | None, index: int, config: bool, proxy: bool, ssh_args: tuple[str, ...],
        master: str | None) -> None:
    """SSH into a running task of job NAME with your own key.

    Add your public key once: `pai ssh-key add ~/.ssh/id_ed25519.pub` (tasks started afterwards let it in). Anything
    after `--` goes to ssh: options (-L 8888:localhost:8888, -i KEY) and a command. The job's owner and admins only.
    """
    conn = connect(master)
    key, role = conn.task_role(name, role)
    if proxy:
        from pai.cli.sshproxy import SSH_LABEL
        from pai.cli.sshproxy import proxy as proxy_through

        path = tunnel_path(key, role, index, SSH_LABEL)
        proxy_through(conn.session.master, conn.session.token, path)
        return
    if config:
        click.echo(config_entry(key, role, index, master), nl=False)
        return
    client = shutil.which("ssh")
    if client is None:
        raise CliError("no ssh client found on PATH (install OpenSSH's client)")
    alias = host_alias(key, role, index)
    argv = [client, "-o", f"ProxyCommand={proxy_command(key, role, index, master)}", "-o", f"HostKeyAlias={alias}",
            "-o", "StrictHostKeyChecking=accept-new", "-o", f"ServerAliveInterval={ALIVE_SECONDS}", f"root@{alias}",
            *ssh_args]
    sys.stdout.flush()
    os.execv(client, argv)


