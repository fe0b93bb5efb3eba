"""``pai submit``: send a v1 JSON or v2 YAML job spec, optionally wait for the job to finish."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import IO, Any

import click

from pai.cli.command import client_command, connect, master_option
from pai.cli.errors import BadResponseError, SpecFileError, WaitTimeoutError
from pai.cli.jobview import job_state, render_final, render_progress
from pai.domain import JobState

JSON_TYPE = "application/json"
YAML_TYPE = "text/yaml"
_YAML_SUFFIXES = frozenset({".yaml", ".yml"})


def echo_warnings(answer: dict[str, Any]) -> None:
    """A submission's warnings, ``warning: FIELD: MESSAGE`` each on stderr: what the cluster accepted and does not
    honour, and what no node of it could ever hold."""
    for warning in answer.get("warnings") or []:
        if isinstance(warning, dict):
            click.echo(f"warning: {warning.get('field')}: {warning.get('message')}", err=True)


@dataclass(frozen=True, slots=True)
class PreparedSpec:
    """The request body and Content-Type for ``POST /api/v2/jobs``."""

    body: bytes
    content_type: str
    protocol_version: int


def _parse(text: str, source: str) -> tuple[Any, bool]:
    """The parsed document and whether it was read as JSON (by extension, else by content)."""
    suffix = PurePath(source).suffix.lower()
    as_json = suffix == ".json" or (suffix not in _YAML_SUFFIXES and text.lstrip().startswith("{"))
    if as_json:
        try:
            return json.loads(text), True
        except json.JSONDecodeError as exc:
            raise SpecFileError(source, _located("JSON", exc.msg, text, exc.lineno, exc.colno)) from None
    import yaml  # imported when a YAML file is read: the other commands do not wait for it

    try:
        return yaml.safe_load(text), False
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = str(exc.problem or exc.context)
        if mark is None:
            raise SpecFileError(source, f"invalid YAML: {problem}") from None
        located = _located("YAML", problem, text, mark.line + 1, mark.column + 1)
        if exc.context and exc.problem and exc.context_mark is not None:
            located += f"\n  ({exc.context} at line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1})"
        raise SpecFileError(source, located) from None
    except yaml.YAMLError as exc:
        raise SpecFileError(source, f"invalid YAML: {exc}") from None


def _located(syntax: str, problem: str, text: str, line: int, column: int) -> str:
    """``invalid YAML at line 3, column 7: <problem>``, then that line of the file with a caret under the column."""
    lines = text.splitlines()
    message = f"invalid {syntax} at line {line}, column {column}: {problem}"
    if 1 <= line <= len(lines):
        source_line = lines[line - 1].expandtabs(1)
        message += f"\n  {line} | {source_line}\n  {' ' * len(str(line))} | {' ' * (column - 1)}^"
    return message


def prepare_spec(text: str, source: str) -> PreparedSpec:
    """v2 (``protocolVersion: 2``) goes as YAML text; anything else is a v1 job and goes as JSON."""
    doc, was_json = _parse(text, source)
    if not isinstance(doc, dict):
        raise SpecFileError(source, "expected a mapping (a JSON object or YAML mapping) at the top level")
    if str(doc.get("protocolVersion")) == "2":
        return PreparedSpec(text.encode(), YAML_TYPE, 2)
    code_dir = doc.get("codeDir")
    if isinstance(code_dir, str) and _is_relative_local(code_dir) and source not in ("-", "<stdin>"):
        # A relative codeDir means "next to the spec file", on the file system the agents share. One with
        # '..' is sent as written: the master's codeDir rule refuses it, the same way for every client.
        doc["codeDir"] = str((Path(source).resolve().parent / code_dir).resolve())
        was_json = False
    body = text if was_json else json.dumps(doc, default=str)
    return PreparedSpec(body.encode(), JSON_TYPE, 1)


def _is_relative_local(path: str) -> bool:
    """Not a URL, not absolute, not OpenPAI's ``$PAI_DEFAULT_FS_URI/...`` (the master replaces the variable)."""
    return bool(path) and "://" not in path and not path.startswith(("/", "$")) and ".." not in PurePath(path).parts


def wait_for_job(
    fetch: Callable[[], dict[str, Any]],
    *,
    key: str,
    timeout: float | None,
    interval: float,
    on_change: Callable[[dict[str, Any]], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll the job detail until its state is terminal; report every change of state. Returns the last detail."""
    deadline = None if timeout is None else clock() + timeout
    last: str | None = None
    while True:
        detail = fetch()
        state = job_state(detail)
        if state != last:
            on_change(detail)
            last = state
        if _terminal(state):
            return detail
        if deadline is not None and clock() + interval > deadline:
            raise WaitTimeoutError(key, timeout or 0.0, state)
        sleep(interval)


def _terminal(state: str) -> bool:
    try:
        return JobState(state).is_terminal()
    except ValueError:
        return False


@client_command("submit")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--wait", is_flag=True, help="Wait until the job ends: exit 0 if it SUCCEEDED, 1 if it ended otherwise.")
@click.option("--timeout", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Give up waiting after this long: exit 124 (the job runs on).")
@click.option("--interval", type=click.FloatRange(min=0.01), default=2.0, show_default=True, metavar="SECONDS",
              help="Time between two polls while waiting.")
@master_option
def submit(file: IO[str], wait: bool, timeout: float | None, interval: float, master: str | None) -> None:
    """Submit a job spec (v1 JSON or v2 YAML).

    FILE is the spec, '-' for stdin. Prints the job name user~job.
    """
    source = "<stdin>" if file.name == "<stdin>" else str(file.name)
    spec = prepare_spec(file.read(), source)
    conn = connect(master)
    answer = conn.api.submit(spec.body, spec.content_type)
    key = answer.get("jobName")
    if not isinstance(key, str) or not key:
        raise BadResponseError("POST", conn.session.master + "/api/v2/jobs", "no jobName in the answer")
    click.echo(key)
    echo_warnings(answer)
    if not wait:
        return
    final = wait_for_job(
        lambda: conn.api.job(key),
        key=key,
        timeout=timeout,
        interval=interval,
        on_change=lambda detail: click.echo(render_progress(key, detail), err=True),
    )
    click.echo(render_final(key, final))
    if job_state(final) != JobState.SUCCEEDED.value:
        raise click.exceptions.Exit(1)
