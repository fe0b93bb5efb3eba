"""The ``pai`` command group; server commands (master, agent, up, ...) are added to it by pai.main."""

from __future__ import annotations

import click

from pai.cli.auth import login, logout
from pai.cli.execute import exec_command
from pai.cli.experiments import experiment
from pai.cli.jobs import job, list_jobs, logs, stop
from pai.cli.masters import masters
from pai.cli.nodes import cordon, nodes, uncordon
from pai.cli.portforward import port_forward
from pai.cli.ssh import ssh
from pai.cli.sshkeys import ssh_key
from pai.cli.submit import submit
from pai.cli.users import group, user


@click.group("pai", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pai", prog_name="pai")
def cli() -> None:
    """pai: submit and watch jobs on a pai (OpenPAI-compatible) cluster."""


for command in (login, logout, submit, list_jobs, job, logs, stop, exec_command, port_forward, ssh, ssh_key, nodes,
                masters, cordon, uncordon, user, group, experiment):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="pai")


if __name__ == "__main__":
    main()
