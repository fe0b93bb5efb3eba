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
