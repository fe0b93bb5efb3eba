"""The ``pai`` console script: the client commands (pai.cli) and the server commands (master, agent, up, vc,
secret-key), which are imported only when one of them runs: a client command does not wait for the server stack's
imports (the scheduler, the database, the agent's runtimes)."""

from __future__ import annotations

from pai.cli.lazy import LazyCommand
from pai.cli.main import cli

# name: (module, attribute, the command's first line of help, which `pai --help` shows; a test keeps them equal)
SERVER_COMMANDS: dict[str, tuple[str, str, str]] = {
    "master": ("pai.commands.master", "master", "Run the master: REST API, scheduler loop and store."),
    "agent": ("pai.nodeagent.cli", "agent",
              "Run the node agent: register with the master, run the tasks it sends, serve their logs."),
    "up": ("pai.commands.up", "up", "Run an embedded cluster: a master on SQLite, one local agent and an admin user."),
    "vc": ("pai.commands.vc", "vc", "Virtual clusters: list them, or try a change offline."),
    "secret-key": ("pai.commands.secretkey", "secret_key", "The key that seals job secrets in the master's database."),
}

for _name, (_module, _attribute, _line) in SERVER_COMMANDS.items():
    cli.add_command(LazyCommand(_name, _module, _attribute, _line))


def main() -> None:
    cli(prog_name="pai")
