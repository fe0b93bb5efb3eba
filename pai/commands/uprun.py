"""``pai up --run FILE``: submit a job (or create an experiment) on the embedded cluster and follow it to its end.

Exit codes as ``pai submit --wait``: 0 the job SUCCEEDED (the experiment COMPLETED), 1 it ended otherwise, 124
the wait timed out (``--timeout``); :class:`~pai.commands.upprocs.Children` raises when the master or the agent
dies meanwhile (exit 3).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pai.cli.api import MasterApi
from pai.cli.errors import CliError, WaitTimeoutError
from pai.cli.experiments import content_type, is_experiment
from pai.cli.experimentview import render_experiment
from pai.cli.http import HttpClient
from pai.cli.submit import echo_warnings, prepare_spec, wait_for_job
from pai.commands.upprocs import Children

JOB_TIMEOUT = 600.0  # seconds --run follows a job before it gives up (and stops everything)
EXPERIMENT_TIMEOUT = 1800.0  # the same for an experiment


def run_and_follow(url: str, password: str, file: Path, timeout: float | None, children: Children) -> int:
    api = MasterApi(HttpClient(url))
    api.http.token = api.login("admin", password)["token"]
    text = file.read_text()
    if is_experiment(text):
        return _run_experiment(api, text, file, EXPERIMENT_TIMEOUT if timeout is None else timeout, children)
    spec = prepare_spec(text, str(file))
    answer = api.submit(spec.body, spec.content_type)
    key = answer["jobName"]
    click.echo(f"submitted {key}")
    echo_warnings(answer)
    detail = wait_for_job(_watched(lambda: api.job(key), children), key=key,
                          timeout=JOB_TIMEOUT if timeout is None else timeout, interval=0.5,
                          on_change=lambda d: click.echo(f"{key}: {d['jobStatus']['state']}"), sleep=children.sleep)
    for role, info in detail["taskRoles"].items():
        for t in info["taskStatuses"]:
            out = api.task_log(key, role, t["taskIndex"], "stdout")
            click.echo(f"--- {role}[{t['taskIndex']}] on {t['containerIp']} exit {t['containerExitCode']}")
            click.echo(out.rstrip("\n"))
    state = detail["jobStatus"]["state"]
    click.echo(f"{key}: {state}")
    return 0 if state == "SUCCEEDED" else 1


def _watched(fetch: Callable[[], dict[str, Any]], children: Children) -> Callable[[], dict[str, Any]]:
    """``fetch``, whose failure is put down to a dead master or agent when one has died."""
    def call() -> dict[str, Any]:
        try:
            return fetch()
        except CliError:
            children.check()
            raise

    return call


def _run_experiment(api: MasterApi, text: str, file: Path, timeout: float, children: Children) -> int:
    """An experiment: created, followed until it ends (its trials' states as they change), then its trials' table."""
    key = api.create_experiment(text.encode(), content_type(text, str(file)))["experimentName"]
    click.echo(f"created experiment {key}")
    seen: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    fetch = _watched(lambda: api.experiment(key), children)
    while True:
        detail = fetch()
        for trial in detail["trials"]:
            state = trial["state"] + (" (searcher)" if trial.get("stoppedBy") == "searcher" else "")
            if seen.get(trial["number"]) != state:
                seen[trial["number"]] = state
                click.echo(f"{key}: trial {trial['number']} {state}  {json.dumps(trial['hparams'], sort_keys=True)}")
        if detail["state"] in ("COMPLETED", "STOPPED"):
            break
        if time.monotonic() > deadline:
            click.echo(render_experiment(detail))
            raise WaitTimeoutError(key, timeout, detail["state"], kind="experiment")
        children.sleep(0.5)
    click.echo(render_experiment(detail))
    click.echo(f"{key}: {detail['state']}")
    return 0 if detail["state"] == "COMPLETED" else 1
