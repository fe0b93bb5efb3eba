"""``pai ssh-key``: your public SSH keys, kept where OpenPAI keeps them (your user's ``extension.sshKeys``, a list of
``{title, value, time}``, as its web portal's profile page writes them). Every task of your jobs started afterwards
lets them in (``pai ssh``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from pai.cli.command import Connection, client_command, connect, master_option
from pai.cli.errors import CliError
from pai.domain.sshkeys import fingerprint, key_problem


@click.group("ssh-key")
def ssh_key() -> None:
    """Your public SSH keys, which your jobs' tasks let in (pai ssh)."""


def _mine(conn: Connection) -> tuple[str, list[dict[str, Any]]]:
    me = conn.session.user
    if not me:
        raise CliError("log in first (pai login): keys are kept in your user")
    keys = (conn.api.user(me).get("extension") or {}).get("sshKeys") or []
    return me, [k for k in keys if isinstance(k, dict)]


def _save(conn: Connection, me: str, keys: list[dict[str, Any]]) -> None:
    conn.api.http.json("PUT", "/api/v2/users/me", payload={"data": {"username": me, "extension": {"sshKeys": keys}},
                                                             "patch": True})


@client_command("list")
@master_option
def key_list(master: str | None) -> None:
    """List your keys: title, type and fingerprint."""
    _, keys = _mine(connect(master))
    for k in keys:
        value = str(k.get("value", "")).strip()
        shown = f"{value.split()[0]} {fingerprint(value)}" if key_problem(value) is None else "(not a public key)"
        click.echo(f"{k.get('title', '')}\t{shown}")


@client_command("add")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--title", help="Its title (default: the key's comment, else the file's name).")
@master_option
def key_add(file: Path, title: str | None, master: str | None) -> None:
    """Add the public key in FILE (like ~/.ssh/id_ed25519.pub; - for stdin)."""
    text = sys.stdin.read() if str(file) == "-" else file.read_text()
    line = text.strip()
    problem = key_problem(line)
    if problem is not None:
        raise CliError(f"{file}: not an SSH public key: {problem}")
    parts = line.split(None, 2)
    title = (title or (parts[2] if len(parts) > 2 else file.stem)).strip()
    conn = connect(master)
    me, keys = _mine(conn)
    if any(k.get("title") == title for k in keys):
        raise CliError(f"you have a key titled {title!r} already (--title another, or pai ssh-key remove {title})")
    if any(str(k.get("value", "")).split()[:2] == parts[:2] for k in keys):
        raise CliError("you have this key already")
    _save(conn, me, [*keys, {"title": title, "value": line, "time": int(time.time() * 1000)}])
    click.echo(f"added key {title!r}: tasks of your jobs started from now on let it in (pai ssh JOB)")


@client_command("remove")
@click.argument("title")
@master_option
def key_remove(title: str, master: str | None) -> None:
    """Remove the key titled TITLE."""
    conn = connect(master)
    me, keys = _mine(conn)
    kept = [k for k in keys if k.get("title") != title]
    if len(kept) == len(keys):
        raise CliError(f"you have no key titled {title!r} (pai ssh-key list)")
    _save(conn, me, kept)
    click.echo(f"removed key {title!r}")


for _command in (key_list, key_add, key_remove):
    ssh_key.add_command(_command)
