"""``pai experiment create|list|show|stop|metrics``: hyperparameter searches (issue 29), over the master's REST API."""

from __future__ import annotations

from pathlib import PurePath
from typing import IO, Any

import click

from pai.cli.command import ClientCommand, connect, master_option
from pai.cli.errors import BadResponseError, CliError
from pai.cli.experimentview import render_experiment, render_experiments, render_series
from pai.cli.output import OutputFormat, output_option

JSON_TYPE = "application/json"
YAML_TYPE = "text/yaml"


def content_type(text: str, source: str) -> str:
    """JSON for a ``.json`` file, or a document that starts with ``{``; YAML otherwise."""
    suffix = PurePath(source).suffix.lower()
    if suffix == ".json" or (suffix not in (".yaml", ".yml") and text.lstrip().startswith("{")):
        return JSON_TYPE
    return YAML_TYPE


def is_experiment(text: str) -> bool:
    """Whether a document is an experiment (``type: experiment``) rather than a job."""
    import yaml  # imported when a file is read: the other commands do not wait for it

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(doc, dict) and doc.get("type") == "experiment"


@click.group("experiment")
def experiment() -> None:
    """Hyperparameter searches: an experiment runs trials (jobs) that a searcher picks and stops."""


@experiment.command("create", cls=ClientCommand)
@click.argument("file", type=click.File("r", encoding="utf-8"))
@master_option
def create(file: IO[str], master: str | None) -> None:
    """Create an experiment from its document (YAML or JSON).

    FILE is the document, '-' for stdin. Prints the experiment's name user~name; the master checks the document
    and says what is wrong with it.
    """
    text = file.read()
    source = "<stdin>" if file.name == "<stdin>" else str(file.name)
    conn = connect(master)
    answer = conn.api.create_experiment(text.encode(), content_type(text, source))
    key = answer.get("experimentName")
    if not isinstance(key, str) or not key:
        raise BadResponseError("POST", conn.session.master + "/api/v2/experiments", "no experimentName in the answer")
    click.echo(key)
    user, _, name = key.partition("~")
    click.echo(f"its trials: pai experiment show {name if user == conn.session.user else key}", err=True)


@experiment.command("list", cls=ClientCommand)
@click.option("--user", "user", metavar="USER", help="Experiments of this user (default: yours).")
@click.option("--all", "all_users", is_flag=True, help="Every experiment you may read.")
@output_option
@master_option
def list_experiments(user: str | None, all_users: bool, output: OutputFormat, master: str | None) -> None:
    """List experiments (yours by default), oldest first.

    TRIALS counts the trials in each state; BEST is the best value of the searcher's metric and its trial's number.
    """
    if all_users and user:
        raise click.UsageError("--all and --user exclude each other")
    conn = connect(master)
    answer = conn.api.experiments(None if all_users else (user or conn.session.user))
    output.emit(answer, render_experiments)


@experiment.command("show", cls=ClientCommand)
@click.argument("name")
@click.option("--sort", type=click.Choice(["metric", "number"]), default="metric", show_default=True,
              help="Trials by their best value of the metric (best first), or by number.")
@output_option
@master_option
def show(name: str, sort: str, output: OutputFormat, master: str | None) -> None:
    """Show an experiment and its trials.

    NAME is user~name, or just name for one of yours. Each trial: its job, state ("(searcher)" when the searcher
    stopped it), hyperparameters, and the latest and best values of the searcher's metric; * marks the best trial.
    """
    conn = connect(master)
    output.emit(conn.api.experiment(conn.experiment_key(name)), lambda detail: render_experiment(detail, sort))


@experiment.command("stop", cls=ClientCommand)
@click.argument("name")
@master_option
def stop(name: str, master: str | None) -> None:
    """Stop an experiment: no new trials, its running trials are stopped. Its owner or an admin."""
    conn = connect(master)
    key = conn.experiment_key(name)
    click.echo(str(conn.api.stop_experiment(key).get("message") or f"stopping {key}"))


def trial_id(detail: dict[str, Any], number: int) -> int:
    trials: list[dict[str, Any]] = detail.get("trials") or []
    for trial in trials:
        if trial.get("number") == number:
            return int(trial["id"])
    have = ", ".join(str(t.get("number")) for t in trials) or "none yet"
    raise CliError(f"experiment {detail.get('key')} has no trial {number} (its trials: {have})")


@experiment.command("metrics", cls=ClientCommand)
@click.argument("name")
@click.argument("trial_number", type=click.IntRange(min=0))
@click.option("--metric", metavar="M", help="Only this metric (default: every metric the trial reported).")
@output_option
@master_option
def metrics(name: str, trial_number: int, metric: str | None, output: OutputFormat, master: str | None) -> None:
    """Show the metrics a trial reported: one row a step, one column a metric.

    NAME is the experiment (user~name, or name for one of yours), TRIAL_NUMBER the trial's number in it (the #
    of `pai experiment show`).
    """
    conn = connect(master)
    detail = conn.api.experiment(conn.experiment_key(name))
    answer = conn.api.trial_metrics(trial_id(detail, trial_number), metric)
    output.emit(answer, render_series)
