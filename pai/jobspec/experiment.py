"""parse_experiment: an experiment document (YAML or JSON, ``job_schemas/experiment.json``) -> :class:`Experiment`.

The document is checked against its schema, then its ranges, the cluster's limit on ``maxTrials`` and its
``trial``: the body of a v2 job, checked as ``POST /api/v2/jobs`` checks one (schema, job-size limits,
references, templates), under the name of the experiment's first trial. Every error is an
:class:`InvalidProtocolError` naming the field (``trial.`` before a field of the trial) and the rule.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from pai.domain.errors import InvalidProtocolError
from pai.domain.experiment import (
    MAX_GRID_POINTS,
    CategoricalSpace,
    ConstSpace,
    DoubleSpace,
    Experiment,
    IntSpace,
    LogSpace,
    Searcher,
    SearcherName,
    Space,
    grid_values,
)
from pai.domain.jobspec import PRIORITY_CLASSES, JobSpec
from pai.domain.limits import DEFAULT_JOB_LIMITS, JobLimits
from pai.jobspec import v2
from pai.jobspec.decode import decode
from pai.jobspec.limits import check_job_limits
from pai.jobspec.schema import ProtocolVersion, describe, validate

SCHEMA = "experiment.json"
_SET_BY_EXPERIMENT = ("protocolVersion", "name", "type")  # of every trial's job


@dataclass(frozen=True, slots=True)
class ParsedExperiment:
    experiment: Experiment
    config: dict[str, Any]  # the document as submitted
    text: str


def trial_name(experiment: str, number: int) -> str:
    """The job name of an experiment's trial."""
    return f"{experiment}-trial-{number}"


def parse_experiment(
    body: bytes | str,
    content_type: str | None = None,
    *,
    priority_classes: Mapping[str, int] = PRIORITY_CLASSES,
    limits: JobLimits = DEFAULT_JOB_LIMITS,
) -> ParsedExperiment:
    """``limits.trials_per_experiment``: the cluster's limit on ``maxTrials``."""
    decoded = decode(body, content_type)
    config = decoded.config
    _check_schema(config)
    searcher = _searcher(config["searcher"], limits.trials_per_experiment)
    spaces = {name: _space(f"hyperparameters.{name}", doc, searcher.name) for name, doc in
              config["hyperparameters"].items()}
    if searcher.name is SearcherName.GRID:
        _check_grid_size(spaces)
    check_trial(config["trial"], config["name"], priority_classes, limits, hparams=example_hparams(spaces))
    experiment = Experiment(name=config["name"], searcher=searcher, hyperparameters=spaces, trial=config["trial"])
    return ParsedExperiment(experiment=experiment, config=config, text=decoded.text)


def experiment_from_config(config: Mapping[str, Any]) -> Experiment:
    """The model of an experiment stored as it was accepted (not checked again: the cluster's limits may have moved
    since, and an accepted experiment goes on)."""
    searcher = _searcher(config["searcher"], math.inf)
    spaces = {name: _space(f"hyperparameters.{name}", doc, searcher.name) for name, doc in
              config["hyperparameters"].items()}
    return Experiment(name=config["name"], searcher=searcher, hyperparameters=spaces, trial=config["trial"])


def trial_job(experiment: str, trial: Mapping[str, Any], number: int) -> dict[str, Any]:
    """The v2 job document of trial ``number``: the experiment's trial body under the trial's name."""
    return {"protocolVersion": 2, "name": trial_name(experiment, number), "type": "job", **copy.deepcopy(dict(trial))}


def trial_spec(experiment: str, trial: Mapping[str, Any], number: int, hparams: Mapping[str, Any],
               priority_classes: Mapping[str, int] = PRIORITY_CLASSES) -> tuple[dict[str, Any], JobSpec]:
    """Trial ``number``'s job document and its spec, ``<% $hparams.x %>`` rendered with its hyperparameters. The
    body was checked when the experiment was posted; a cluster whose priority classes changed since may refuse it
    now (InvalidProtocolError)."""
    job = trial_job(experiment, trial, number)
    return job, v2.normalize(copy.deepcopy(job), priority_classes, hparams=hparams)


def example_hparams(spaces: Mapping[str, Space]) -> dict[str, Any]:
    """A value of every hyperparameter (its lowest), to check the trial body's ``$hparams`` references with."""
    return {name: grid_values(space)[0] if isinstance(space, ConstSpace | CategoricalSpace | IntSpace)
            else space.minval for name, space in spaces.items()}


def check_trial(trial: dict[str, Any], name: str, priority_classes: Mapping[str, int] = PRIORITY_CLASSES,
                limits: JobLimits = DEFAULT_JOB_LIMITS, *, hparams: Mapping[str, Any] | None = None) -> None:
    """The trial body as a v2 job named after the experiment's first trial, with ``hparams`` for its
    ``<% $hparams.x %>`` references; its errors' fields under ``trial.``."""
    for key in _SET_BY_EXPERIMENT:
        if key in trial:
            raise InvalidProtocolError(f"trial.{key}: is set by the experiment", field=f"trial.{key}")
    job = trial_job(name, trial, 0)
    try:
        validate(job, ProtocolVersion.V2)
        check_job_limits(job, ProtocolVersion.V2, limits)
        v2.normalize(job, priority_classes, hparams=hparams or {})
    except InvalidProtocolError as error:
        field = f"trial.{error.field}" if error.field else "trial"
        raise InvalidProtocolError(f"trial.{error.message}" if error.field else f"trial: {error.message}",
                                   field=field) from None


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(resources.files("job_schemas").joinpath(SCHEMA).read_text()))


def _check_schema(config: dict[str, Any]) -> None:
    errors = [e for e in _validator().iter_errors(config) if e.validator != "if"]
    error = best_match(errors)
    if error is not None:
        field, rule = describe(error)
        raise InvalidProtocolError(f"{field or '<root>'}: {rule}", field=field)


def _searcher(doc: Mapping[str, Any], max_trials: float) -> Searcher:
    if doc["maxTrials"] > max_trials:
        raise InvalidProtocolError(
            f"searcher.maxTrials: {doc['maxTrials']} is greater than the maximum of {max_trials} (cluster limit "
            f"trialsPerExperiment)",
            field="searcher.maxTrials")
    return Searcher(
        name=SearcherName(doc["name"]), metric=doc["metric"], max_trials=doc["maxTrials"],
        smaller_is_better=doc.get("smallerIsBetter", True),
        max_concurrent_trials=doc.get("maxConcurrentTrials", 1), time_metric=doc.get("timeMetric", "step"),
        max_time=doc.get("maxTime"), divisor=doc.get("divisor", 4))


def _space(path: str, doc: Mapping[str, Any], searcher: SearcherName) -> Space:
    kind = doc["type"]
    if kind == "const":
        return ConstSpace(doc["val"])
    if kind == "categorical":
        return CategoricalSpace(tuple(doc["vals"]))
    low, high, count = doc["minval"], doc["maxval"], doc.get("count")
    for key, value in (("minval", low), ("maxval", high)):
        if not math.isfinite(value):
            raise InvalidProtocolError(f"{path}.{key}: {value} is not a finite number", field=f"{path}.{key}")
    if low > high:
        raise InvalidProtocolError(f"{path}.minval: {low} is greater than maxval {high}", field=f"{path}.minval")
    if kind == "int":
        return IntSpace(int(low), int(high), count)
    if count is None and searcher is SearcherName.GRID:
        raise InvalidProtocolError(f"{path}.count: is required for a {kind} range in a grid search",
                                   field=f"{path}.count")
    if kind == "log":
        if low <= 0:
            raise InvalidProtocolError(f"{path}.minval: {low} is not greater than 0 (a log range)",
                                       field=f"{path}.minval")
        return LogSpace(float(low), float(high), count)
    return DoubleSpace(float(low), float(high), count)


def _check_grid_size(spaces: Mapping[str, Space]) -> None:
    points = 1
    for space in spaces.values():
        points *= len(grid_values(space))
        if points > MAX_GRID_POINTS:
            raise InvalidProtocolError(
                f"hyperparameters: the grid has more than {MAX_GRID_POINTS} points", field="hyperparameters")
