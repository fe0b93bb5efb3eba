"""What ``pai master`` and ``pai agent`` actually read: their flags (the real click commands), the environment
variables their code reads (found in the source), and how each reaches ``MasterConfig``. The deploy tests check
the samples, the units, the Dockerfile and the compose file against these, never against a list kept by hand."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import shlex
import subprocess
import sysconfig
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

import click
from click.testing import CliRunner

from pai.commands import master as master_module
from pai.commands.master import master
from pai.nodeagent.cli import agent
from pai.rest_server.config import MasterConfig

ROOT = Path(__file__).resolve().parents[2]
PAI_SCRIPT = Path(sysconfig.get_path("scripts")) / "pai"
COMMANDS: dict[str, click.Command] = {"master": master, "agent": agent}
_SETTING_ENV = re.compile(r"(PAI|DOCKER)_[A-Z0-9_]+")
# The commands' code that runs in the master process; the other commands (up, vc, ...) are clients of a master.
_MASTER_COMMANDS = ("pai/commands/master.py", "pai/commands/logs.py")


def _process_of(rel: str) -> str | None:
    """Which server process runs the module at ``rel`` (None: only the CLI's)."""
    if rel.startswith("pai/nodeagent/"):
        return "agent"
    if rel.startswith("pai/cli/") or rel in ("pai/main.py", "pai/__main__.py") or (
            rel.startswith("pai/commands/") and rel not in _MASTER_COMMANDS):
        return None
    return "master"


def options(command: click.Command) -> list[click.Option]:
    """The options an operator sets (hidden ones are the tests' own, such as the lease's timings)."""
    return [p for p in command.params if isinstance(p, click.Option) and p.name != "help" and not p.hidden]


def long_flag(option: click.Option) -> str:
    return max(option.opts, key=len)


def envvars(option: click.Option) -> list[str]:
    if option.envvar is None:
        return []
    return [option.envvar] if isinstance(option.envvar, str) else list(option.envvar)


def _env_reads(tree: ast.Module) -> Iterator[str]:
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name)
                 if isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}

    def text(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return None

    def is_environ(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
            isinstance(node, ast.Name) and node.id == "environ")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            getter = (isinstance(f, ast.Attribute) and f.attr in ("get", "pop") and is_environ(f.value)) or (
                isinstance(f, ast.Attribute) and f.attr == "getenv")
            if getter and node.args and (name := text(node.args[0])):
                yield name
            for kw in node.keywords:
                if kw.arg == "envvar":
                    values = kw.value.elts if isinstance(kw.value, (ast.List, ast.Tuple)) else [kw.value]
                    yield from (n for v in values if (n := text(v)))
        elif isinstance(node, ast.Subscript) and is_environ(node.value) and (name := text(node.slice)):
            yield name


@cache
def env_read_by() -> dict[str, frozenset[str]]:
    """``{"master": {...}, "agent": {...}}``: the PAI_*/DOCKER_* variables read in the code of each process."""
    found: dict[str, set[str]] = {"master": set(), "agent": set()}
    for path in sorted((ROOT / "pai").rglob("*.py")):
        process = _process_of(path.relative_to(ROOT).as_posix())
        if process is not None:
            found[process] |= {n for n in _env_reads(ast.parse(path.read_text())) if _SETTING_ENV.fullmatch(n)}
    return {k: frozenset(v) for k, v in found.items()}


def parse_args(command: click.Command, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """The parameters ``command`` gets from ``args`` (types checked, files that must exist looked for), with only
    ``env`` as the environment's settings."""
    saved = {k: v for k, v in os.environ.items() if _SETTING_ENV.fullmatch(k)}
    try:
        for k in saved:
            del os.environ[k]
        os.environ.update(env or {})
        with command.make_context(command.name or "", list(args)) as ctx:
            return dict(ctx.params)
    finally:
        for k in env or {}:
            os.environ.pop(k, None)
        os.environ.update(saved)


@cache
def _help_ok(argv: tuple[str, ...]) -> str:
    r = subprocess.run([str(PAI_SCRIPT), *argv, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"`pai {shlex.join(argv)} --help` failed ({r.returncode}): {r.stderr or r.stdout}"
    return r.stdout


def check_pai_command(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """``argv`` (``pai SUBCOMMAND ARGS...``) is a real command: the installed ``pai`` accepts it (run with
    ``--help`` appended, so that nothing starts), and its arguments parse; returns the parameters."""
    assert argv and Path(argv[0]).name == "pai", f"not a pai command: {argv}"
    assert len(argv) > 1 and argv[1] in COMMANDS, f"pai {argv[1:2]} is not one of {sorted(COMMANDS)}"
    usage = _help_ok(tuple(argv[1:]))
    assert usage.startswith(f"Usage: pai {argv[1]} "), usage
    return parse_args(COMMANDS[argv[1]], argv[2:], env)


def defaults(command: click.Command, required: list[str] | None = None) -> dict[str, Any]:
    return parse_args(command, required or [])


def undocumented(sample: str, names: list[str]) -> list[str]:
    """The ``names`` (flags or variables) that no comment line of ``sample`` mentions."""
    comments = "\n".join(line for line in sample.splitlines() if line.lstrip().startswith("#"))
    return [n for n in names if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", comments)]


def master_config(args: list[str], env: dict[str, str] | None = None) -> MasterConfig:
    """The ``MasterConfig`` that ``pai master ARGS`` builds with ``env`` as its only settings (nothing starts)."""
    made: list[MasterConfig] = []

    def serve(config: MasterConfig, *args: object) -> None:
        made.append(config)

    clear: dict[str, str | None] = {k: None for k in os.environ if _SETTING_ENV.fullmatch(k)}
    with mock.patch.object(master_module, "serve", serve), \
            mock.patch.object(master_module, "setup_logging", lambda process: None):
        result = CliRunner().invoke(master, args, env={**clear, **(env or {})}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return made[0]


def config_fields(config: object, prefix: str = "") -> dict[str, Any]:
    """Every leaf field of a (nested) config dataclass, as ``{"MasterConfig.port": 9186, "LauncherConfig.x": ...}``."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):  # type: ignore[arg-type]
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.update(config_fields(value))
        else:
            out[f"{type(config).__name__}.{f.name}"] = value
    return out
