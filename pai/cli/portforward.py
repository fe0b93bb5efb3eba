"""``pai port-forward JOB LOCAL:LABEL``: a local port that reaches a running task's labelled port through the master
(each connection one tunnel), for anything the proxy does not carry (a database, a debugger, ssh). The tunnels
(aiohttp) are in ``pai.cli.tunnel``, imported when the command runs."""

from __future__ import annotations

import contextlib

import click

from pai.cli.command import client_command, connect, master_option
from pai.cli.urls import tunnel_path


def parse_mapping(mapping: str) -> tuple[int, str]:
    """``LOCAL:LABEL`` (LOCAL 0: any free port)."""
    local, colon, label = mapping.partition(":")
    if not colon or not label or not local.isdigit() or not 0 <= int(local) <= 65535:
        raise click.BadParameter(f"{mapping!r}: expected LOCAL:LABEL, like 6006:tensorboard (LOCAL 0: any free port)",
                                 param_hint="LOCAL:LABEL")
    return int(local), label


@client_command("port-forward")
@click.argument("name")
@click.argument("mapping", metavar="LOCAL:LABEL")
@click.option("--role", metavar="ROLE", help="Task role (default: the job's first role).")
@click.option("--index", type=click.IntRange(min=0), default=0, show_default=True, help="Task index in the role.")
@master_option
def port_forward(name: str, mapping: str, role: str | None, index: int, master: str | None) -> None:
    """Forward a local port to a running task's port.

    Listens on 127.0.0.1:LOCAL; every connection there reaches the port labelled LABEL of task INDEX of ROLE of job
    NAME, through the master (the node's ports need not be reachable from here). The job's owner and admins only.
    For a web app, the browser can use the master's proxy instead: /proxy/<user>~<job>/<role>/<index>/<label>/.
    """
    local, label = parse_mapping(mapping)
    conn = connect(master)
    key, role = conn.task_role(name, role)
    from pai.cli.tunnel import Forwarder  # aiohttp: imported when a forward starts

    forwarder = Forwarder(conn.session.master, conn.session.token, tunnel_path(key, role, index, label))
    with contextlib.suppress(KeyboardInterrupt):
        forwarder.run(local, f"port {label} of {role}[{index}] of {key}")
