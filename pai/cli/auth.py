"""``pai login`` and ``pai logout``: the token in the config file."""

from __future__ import annotations

import os

import click

from pai.cli.command import client_command, master_api
from pai.cli.config import DEFAULT_MASTER, CliConfig, config_path, load_config, save_config
from pai.cli.errors import BadResponseError, CliError
from pai.cli.urls import normalize_url


def _default_master() -> str:
    try:
        return load_config(config_path(os.environ)).master or DEFAULT_MASTER
    except CliError:
        return DEFAULT_MASTER


@client_command("login")
@click.option("--master", envvar="PAI_MASTER_URL", metavar="URL", prompt="Master URL", default=_default_master,
              help="The master's URL (env PAI_MASTER_URL).")
@click.option("--user", envvar="PAI_USER", prompt="User", help="User name (env PAI_USER).")
@click.option("--password", envvar="PAI_PASSWORD", prompt="Password", hide_input=True,
              help="Password (env PAI_PASSWORD; prompted, hidden, when missing).")
@click.option("--expiration", type=click.IntRange(min=1), metavar="SECONDS", help="Token lifetime.")
def login(master: str, user: str, password: str, expiration: int | None) -> None:
    """Log in and store the token.

    The master, user and token go to $PAI_CONFIG or ~/.config/pai/config.json (mode 0600).
    """
    url = normalize_url(master)
    answer = master_api(url).login(user, password, expiration)
    token = answer.get("token")
    if not isinstance(token, str) or not token:
        raise BadResponseError("POST", url + "/api/v2/authn/basic/login", "no token in the answer")
    name = str(answer.get("user") or user)
    path = config_path(os.environ)
    save_config(path, CliConfig(master=url, user=name, token=token))
    role = " (admin)" if answer.get("admin") else ""
    click.echo(f"Logged in to {url} as {name}{role}; token saved in {path}")


@client_command("logout")
def logout() -> None:
    """Revoke the stored token on the master and forget it.

    The master and user name stay as defaults for the next login. A master that cannot be reached (or no longer
    knows the token) is reported, and the token is forgotten all the same.
    """
    path = config_path(os.environ)
    config = load_config(path)
    if config.token is None:
        click.echo("Not logged in.")
        return
    try:
        master_api(config.master or DEFAULT_MASTER, config.token).logout()
        revoked = ""
    except CliError as e:
        revoked = f" (the master did not revoke the token: {e})"
    save_config(path, CliConfig(master=config.master, user=config.user))
    click.echo(f"Logged out of {config.master}{revoked}.")
