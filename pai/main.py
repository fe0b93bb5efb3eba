"""The ``pai`` console script."""

from __future__ import annotations

from pai.cli.main import cli
from pai.commands.master import master
from pai.commands.secretkey import secret_key
from pai.commands.up import up
from pai.commands.vc import vc
from pai.nodeagent.cli import agent

cli.add_command(master)
cli.add_command(agent)
cli.add_command(up)
cli.add_command(vc)
cli.add_command(secret_key)


def main() -> None:
    cli(prog_name="pai")
