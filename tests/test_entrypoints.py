"""``pai --help`` and ``python -m pai --help`` work from an installed project and list every command group."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

COMMANDS = ("master", "agent", "up", "vc", "submit", "jobs", "stop", "login", "nodes")


@pytest.mark.parametrize("argv", [
    pytest.param([sys.executable, "-m", "pai"], id="python-m-pai"),
    pytest.param([str(Path(sysconfig.get_path("scripts")) / "pai")], id="console-script"),
])
def test_help_lists_the_commands(argv: list[str]) -> None:
    r = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    listed = {line.split()[0] for line in r.stdout.split("Commands:")[1].splitlines() if line.strip()}
    assert set(COMMANDS) <= listed, r.stdout


def test_lazy_commands_stand_in_the_help_by_their_own_first_line() -> None:
    """The server commands in ``pai --help`` and the replay's in ``pai vc --help``: each line is how the command's
    own help begins."""
    from pai.cli.lazy import LazyCommand
    from pai.commands.vc import REPLAY_COMMANDS, vc
    from pai.main import SERVER_COMMANDS, cli

    for group, table in ((cli, SERVER_COMMANDS), (vc, REPLAY_COMMANDS)):
        for name, (_, _, line) in table.items():
            lazy = group.commands[name]
            assert isinstance(lazy, LazyCommand)
            real = " ".join((lazy.load().help or "").split())
            assert real.startswith(line.rstrip(".")), name


def test_a_client_command_does_not_import_the_server_stack() -> None:
    """``pai --help`` and the client commands import pai.cli only: not the master's, the store's or the agent's
    modules, nor SQLAlchemy (``python -X importtime`` lists what an interpreter imported)."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "pai", "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    server = sorted(m for m in imported if m.split(".")[0] == "sqlalchemy" or m.startswith(
        ("pai.rest_server", "pai.store", "pai.launcher", "pai.nodeagent", "pai.vc", "pai.commands")))
    assert server == [], server
