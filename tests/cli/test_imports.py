"""A client command imports only what it needs: no server, scheduler, database or aiohttp modules, whose imports
every ``pai`` invocation would wait for (issue 30). Behaviour, not timing: what is in ``sys.modules`` of a fresh
interpreter after each command's ``--help``, and after ``pai jobs`` has listed jobs from a master over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .builders import job_summary
from .fake_master import FakeMaster

ROOT = Path(__file__).resolve().parents[2]
# the server's, the scheduler's, the database's and aiohttp (client and server: only exec and port-forward need it,
# when they run)
FORBIDDEN = ("pai.rest_server", "pai.launcher", "pai.store", "pai.vc", "pai.nodeagent", "pai.jobspec",
             "pai.commands.replay", "sqlalchemy", "alembic", "aiohttp", "optuna", "jsonschema", "fastjsonschema")

# Every client command's --help, one after another in one interpreter: after each, the forbidden modules that are
# loaded, by command. ``vc`` is a server command whose group holds the client's ``vc list``: it is walked too.
WALK = """
import json, sys
import click
from pai.main import cli
from pai.cli.lazy import LazyCommand

FORBIDDEN = tuple(sys.argv[1].split(","))
found = {}

def loaded():
    return sorted(m for m in sys.modules if m in FORBIDDEN or m.startswith(tuple(f + "." for f in FORBIDDEN)))

def walk(command, path):
    if isinstance(command, LazyCommand):
        if path != ["vc"]:
            return
        command = command.load()
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            walk(sub, [*path, name])
        return
    try:
        cli.main([*path, "--help"], prog_name="pai", standalone_mode=False)
    except SystemExit:
        pass
    found[" ".join(path)] = loaded()

walk(cli, [])
print(json.dumps(found))
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAI_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def test_no_client_command_s_help_imports_the_server_stack_or_aiohttp() -> None:
    r = subprocess.run([sys.executable, "-c", WALK, ",".join(FORBIDDEN)], capture_output=True, text=True, env=_env(),
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    found: dict[str, list[str]] = json.loads(r.stdout.splitlines()[-1])
    assert {"jobs", "submit", "logs", "exec", "port-forward", "ssh", "vc list", "job show", "experiment list",
            "nodes", "user list"} <= set(found), sorted(found)
    assert {command: modules for command, modules in found.items() if modules} == {}


def test_pai_jobs_lists_without_importing_them(master: FakeMaster, tmp_path: Path) -> None:
    """The whole command, from the console entry point to the table printed from the master's answer."""
    master.reply("GET", "/api/v2/jobs", {"totalCount": 1, "data": [job_summary("mnist")]})
    script = ("import sys\nfrom pai.main import main\ntry:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
              f"print([m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} or m.startswith({FORBIDDEN!r})])\n"
              "sys.exit(code)\n")
    r = subprocess.run([sys.executable, "-c", script, "jobs"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=60, env=_env(PAI_MASTER_URL=master.url, PAI_TOKEN="tok-admin", PAI_USER="admin",
                                            PAI_CONFIG=str(tmp_path / "config.json")))
    assert r.returncode == 0, r.stderr
    assert "mnist" in r.stdout
    assert r.stdout.splitlines()[-1] == "[]"
    master.only("GET", "/api/v2/jobs")
