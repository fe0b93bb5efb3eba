"""Experiment documents (job_schemas/experiment.json, pai.jobspec.experiment): what is accepted and how, and every
refusal naming its field and its rule."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from pai.domain.errors import InvalidProtocolError
from pai.domain.experiment import (
    CategoricalSpace,
    ConstSpace,
    DoubleSpace,
    IntSpace,
    LogSpace,
    SearcherName,
    grid_values,
)
from pai.domain.limits import JobLimits
from pai.jobspec.experiment import parse_experiment, trial_name
from tests.jobspec.builders import v2_role


def experiment(**over: Any) -> dict[str, Any]:
    """The issue's example: every kind of hyperparameter, an ASHA searcher, a one-role trial."""
    doc: dict[str, Any] = {
        "protocolVersion": 2,
        "name": "lr-search",
        "type": "experiment",
        "searcher": {"name": "asha", "metric": "loss", "smallerIsBetter": True, "maxTrials": 16,
                     "maxConcurrentTrials": 4, "timeMetric": "step", "maxTime": 100, "divisor": 4},
        "hyperparameters": {
            "lr": {"type": "log", "minval": 0.0001, "maxval": 1.0},
            "layers": {"type": "int", "minval": 1, "maxval": 4},
            "dropout": {"type": "double", "minval": 0.0, "maxval": 0.5},
            "optimizer": {"type": "categorical", "vals": ["sgd", "adam"]},
            "batch": {"type": "const", "val": 64},
        },
        "trial": {
            "prerequisites": [{"name": "image", "type": "dockerimage", "uri": "busybox"}],
            "taskRoles": {"worker": v2_role(commands=["python train.py --lr <% $hparams.lr %>"])},
        },
    }
    doc.update(over)
    return doc


def changed(path: str, value: Any) -> dict[str, Any]:
    """The example with the field at ``path`` (dots) set to ``value``, or removed when ``value`` is DELETE."""
    doc = experiment()
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node[part]
    if value is DELETE:
        del node[last]
    else:
        node[last] = copy.deepcopy(value)
    return doc


DELETE = object()


def test_the_example_parses_into_the_model() -> None:
    parsed = parse_experiment(yaml.safe_dump(experiment(), sort_keys=False), "text/yaml")
    exp = parsed.experiment
    assert exp.name == "lr-search"
    assert exp.searcher.name is SearcherName.ASHA
    assert (exp.searcher.metric, exp.searcher.max_trials, exp.searcher.max_concurrent_trials) == ("loss", 16, 4)
    assert (exp.searcher.max_time, exp.searcher.divisor, exp.searcher.min_resource) == (100, 4, 6)
    assert exp.hyperparameters == {
        "lr": LogSpace(0.0001, 1.0), "layers": IntSpace(1, 4), "dropout": DoubleSpace(0.0, 0.5),
        "optimizer": CategoricalSpace(("sgd", "adam")), "batch": ConstSpace(64)}
    assert exp.trial["taskRoles"]["worker"]["commands"] == ["python train.py --lr <% $hparams.lr %>"]


def test_json_and_defaults() -> None:
    doc = experiment(searcher={"name": "random", "metric": "accuracy", "maxTrials": 3})
    searcher = parse_experiment(json.dumps(doc), "application/json").experiment.searcher
    assert (searcher.smaller_is_better, searcher.max_concurrent_trials, searcher.time_metric, searcher.max_time,
            searcher.divisor) == (True, 1, "step", None, 4)


@dataclass
class Bad:
    name: str
    doc: dict[str, Any]
    field: str
    rule: str  # a part of the message
    max_trials: int = 1_000


GRID = {"name": "grid", "metric": "loss", "maxTrials": 10}
BAD = [
    Bad("unknown searcher", changed("searcher.name", "bayes"), "searcher.name", "is not one of"),
    Bad("missing metric", changed("searcher.metric", DELETE), "searcher.metric", "is required"),
    Bad("empty metric", changed("searcher.metric", ""), "searcher.metric", "should be non-empty"),
    Bad("maxConcurrentTrials below 1", changed("searcher.maxConcurrentTrials", 0), "searcher.maxConcurrentTrials",
        "less than the minimum of 1"),
    Bad("maxTrials past the cluster's limit", experiment(), "searcher.maxTrials",
        "16 is greater than the maximum of 10 (cluster limit trialsPerExperiment)", max_trials=10),
    Bad("asha without maxTime", changed("searcher.maxTime", DELETE), "searcher.maxTime", "is required"),
    Bad("hyperband without maxTime", experiment(searcher={"name": "hyperband", "metric": "loss", "maxTrials": 4}),
        "searcher.maxTime", "is required"),
    Bad("divisor of 1", changed("searcher.divisor", 1), "searcher.divisor", "less than the minimum of 2"),
    Bad("unknown searcher field", changed("searcher.patience", 3), "searcher.patience", "additional property"),
    Bad("unknown hyperparameter type", changed("hyperparameters.lr.type", "exp"), "hyperparameters.lr.type",
        "is not one of"),
    Bad("log range from 0", changed("hyperparameters.lr.minval", 0), "hyperparameters.lr.minval",
        "0 is not greater than 0 (a log range)"),
    Bad("log range below 0", changed("hyperparameters.lr", {"type": "log", "minval": -1, "maxval": 1}),
        "hyperparameters.lr.minval", "is not greater than 0"),
    Bad("minval above maxval", changed("hyperparameters.dropout.minval", 0.9), "hyperparameters.dropout.minval",
        "0.9 is greater than maxval 0.5"),
    Bad("int range of fractions", changed("hyperparameters.layers.maxval", 4.5), "hyperparameters.layers.maxval",
        "is not of type integer"),
    Bad("range without maxval", changed("hyperparameters.layers.maxval", DELETE), "hyperparameters.layers.maxval",
        "is required"),
    Bad("const without val", changed("hyperparameters.batch", {"type": "const"}), "hyperparameters.batch.val",
        "is required"),
    Bad("categorical without values", changed("hyperparameters.optimizer.vals", []),
        "hyperparameters.optimizer.vals", "must have at least 1 item"),
    Bad("categorical of objects", changed("hyperparameters.optimizer.vals", [{"a": 1}]),
        "hyperparameters.optimizer.vals[0]", "is not of type"),
    Bad("no hyperparameters", changed("hyperparameters", {}), "hyperparameters", "at least 1 entry"),
    Bad("a hyperparameter name that is no identifier", changed("hyperparameters.my-lr", {"type": "const", "val": 1}),
        "hyperparameters.my-lr", "does not match"),
    Bad("double without count in a grid", changed("searcher", GRID), "hyperparameters.dropout.count",
        "is required for a double range in a grid search"),
    Bad("a grid too large", experiment(searcher=GRID, hyperparameters={
        "a": {"type": "int", "minval": 0, "maxval": 999}, "b": {"type": "int", "minval": 0, "maxval": 99}}),
        "hyperparameters", "more than 10000 points"),
    Bad("not an experiment", changed("type", "job"), "type", "is not one of"),
    Bad("missing trial", changed("trial", DELETE), "trial", "is required"),
    Bad("trial without task roles", changed("trial.taskRoles", DELETE), "trial.taskRoles", "is required"),
    Bad("trial role with a bad field", changed("trial.taskRoles.worker.instances", 0),
        "trial.taskRoles.worker.instances", "less than the minimum"),
    Bad("trial naming an unknown image", changed("trial.taskRoles.worker.dockerImage", "nope"),
        "trial.taskRoles.worker.dockerImage", "nope"),
    Bad("trial with its own name", changed("trial.name", "x"), "trial.name", "is set by the experiment"),
]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.name)
def test_bad_documents_name_the_field_and_the_rule(case: Bad) -> None:
    with pytest.raises(InvalidProtocolError) as caught:
        parse_experiment(yaml.safe_dump(case.doc), "text/yaml", limits=JobLimits(trials_per_experiment=case.max_trials))
    assert caught.value.field == case.field, caught.value.message
    assert caught.value.message.startswith(f"{case.field}: ")
    assert case.rule in caught.value.message


@pytest.mark.parametrize(("space", "values"), [
    pytest.param(IntSpace(1, 4), (1, 2, 3, 4), id="int: every integer"),
    pytest.param(IntSpace(0, 100, 3), (0, 50, 100), id="int with count"),
    pytest.param(DoubleSpace(0.0, 0.5, 3), (0.0, 0.25, 0.5), id="double"),
    pytest.param(LogSpace(0.001, 1.0, 4), (0.001, 0.01, 0.1, 1.0), id="log: values, evenly in their logarithm"),
    pytest.param(CategoricalSpace(("a", "b")), ("a", "b"), id="categorical"),
    pytest.param(ConstSpace(7), (7,), id="const"),
])
def test_grid_values(space: Any, values: tuple[Any, ...]) -> None:
    assert grid_values(space) == pytest.approx(values)


def test_the_schema_is_a_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(json.loads(resources.files("job_schemas").joinpath("experiment.json").read_text()))


def test_trial_names() -> None:
    assert trial_name("lr-search", 3) == "lr-search-trial-3"
