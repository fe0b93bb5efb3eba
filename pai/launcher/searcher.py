"""The searcher: a pure core that decides an experiment's next step from its records (issue 29).

``decide(experiment, trials, seed)`` rebuilds an Optuna study in memory from what the store holds (each trial's
hyperparameters, state and reports), replays the reports through the pruner in the order they arrived, and
asks the sampler for new trials (ask-and-tell). Nothing is kept between calls: a master that restarts, or
another that takes over, makes the same decisions from the same records.

- random, tpe, asha: Optuna's RandomSampler / TPESampler, seeded per trial from ``seed`` (the experiment's id)
  and the trial's number, so a new trial never repeats the draw of an earlier one.
- grid: the points of Optuna's GridSampler over :func:`pai.domain.experiment.grid_values` (int ranges
  enumerated, double and log ranges in ``count`` steps; the parser requires ``count`` of them), in its order,
  shuffled by ``seed``; a point a trial holds (by value) is never proposed again. A new trial is asked at its
  point (``enqueue_trial``): Optuna 5's GridSampler assigns points by Optuna's trial numbers, which a study
  rebuilt from our records does not keep.
- asha: Optuna's SuccessiveHalvingPruner, ``min_resource`` from maxTime / divisor (see
  :attr:`Searcher.min_resource`), ``reduction_factor`` = divisor. A running trial the pruner stops at a rung is
  returned in ``stop`` (once: not again when it is already ``stop_requested``).
- hyperband: Optuna's HyperbandPruner (brackets of successive halving, from ``min_resource`` to maxTime),
  the same replay.

Trial numbers continue after the highest existing one. A COMPLETED trial's value is the last value it reported
of the searcher's metric (one without it counts as failed).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.pruners import BasePruner, HyperbandPruner, NopPruner, SuccessiveHalvingPruner
from optuna.samplers import BaseSampler, GridSampler, RandomSampler, TPESampler
from optuna.trial import TrialState as OptunaState
from optuna.trial import create_trial

from pai.domain.experiment import (
    CategoricalSpace,
    ConstSpace,
    DoubleSpace,
    Experiment,
    IntSpace,
    LogSpace,
    Report,
    SearcherName,
    Space,
    Trial,
    TrialState,
    grid_values,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)
STUDY_NAME = "experiment"  # fixed: Hyperband assigns a trial's bracket from the study's name and its number


@dataclass(frozen=True, slots=True)
class NewTrial:
    number: int
    hparams: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SearchDecision:
    new_trials: tuple[NewTrial, ...] = ()
    stop: tuple[int, ...] = ()  # numbers of running trials the searcher stops (STOPPED, stoppedBy searcher)
    complete: bool = False  # every trial the search will run has ended


def decide(experiment: Experiment, trials: Sequence[Trial], seed: int) -> SearchDecision:
    """What to do next: new trials (up to maxConcurrentTrials active and maxTrials in all), running trials to
    stop, or that the experiment is complete. ``trials``: all of its trials, in any order, their reports in any
    order; ``seed``: fixed per experiment (its id). The same arguments always give the same decision."""
    trials = sorted(trials, key=lambda t: t.number)
    spaces = experiment.hyperparameters
    distributions = {name: d for name, space in spaces.items() if (d := _distribution(space)) is not None}
    searcher = experiment.searcher
    study = optuna.create_study(direction="minimize" if searcher.smaller_is_better else "maximize",
                                sampler=RandomSampler(seed=seed), pruner=_pruner(experiment),
                                study_name=STUDY_NAME)
    ids = _add_trials(study, trials, distributions)
    pruned = _replay(study, experiment, trials, ids)
    _finish(study, experiment, trials, ids)
    stop = tuple(t.number for t in trials if t.number in pruned and t.state.is_active() and not t.stop_requested)
    points = _free_points(spaces, trials, seed) if searcher.name is SearcherName.GRID else None
    limit = searcher.max_trials if points is None else min(searcher.max_trials, len(trials) + len(points))
    active = sum(t.state.is_active() for t in trials)
    room = max(0, min(searcher.max_concurrent_trials - active, limit - len(trials)))
    first = trials[-1].number + 1 if trials else 0
    new = tuple(_ask(study, experiment, distributions, first + i, seed, points[i] if points else None)
                for i in range(room))
    complete = len(trials) >= limit and not any(t.state.is_active() for t in trials)
    return SearchDecision(new_trials=new, stop=stop, complete=complete)


def _distribution(space: Space) -> BaseDistribution | None:
    match space:
        case ConstSpace():
            return None  # not searched: added to every trial's hyperparameters as it is
        case IntSpace(low, high, _):
            return IntDistribution(low, high)
        case DoubleSpace(low, high, _):
            return FloatDistribution(low, high)
        case LogSpace(low, high, _):
            return FloatDistribution(low, high, log=True)
        case CategoricalSpace(vals):
            return CategoricalDistribution(vals)
    raise AssertionError(space)


def _free_points(spaces: Mapping[str, Space], trials: Iterable[Trial], seed: int) -> list[dict[str, Any]]:
    """The grid's points no trial holds, in the order of Optuna's GridSampler (its grid shuffled by ``seed``).
    A point is held by value, whatever the number of the trial that holds it."""
    grid = GridSampler({name: list(grid_values(s)) for name, s in spaces.items() if not isinstance(s, ConstSpace)},
                       seed=seed)
    names = grid._param_names
    held = {tuple(t.hparams.get(name) for name in names) for t in trials}
    return [dict(zip(names, point, strict=True)) for point in grid._all_grids if tuple(point) not in held]


def _pruner(experiment: Experiment) -> BasePruner:
    searcher = experiment.searcher
    if searcher.name is SearcherName.ASHA:
        return SuccessiveHalvingPruner(min_resource=searcher.min_resource, reduction_factor=searcher.divisor)
    if searcher.name is SearcherName.HYPERBAND:
        return HyperbandPruner(min_resource=searcher.min_resource, max_resource=searcher.max_time or 1,
                               reduction_factor=searcher.divisor)
    return NopPruner()


def _sampler(experiment: Experiment, number: int, seed: int) -> BaseSampler:
    trial_seed = (seed * 1_000_003 + number) % 2**32
    if experiment.searcher.name is SearcherName.TPE:
        return TPESampler(seed=trial_seed)
    return RandomSampler(seed=trial_seed)


def _add_trials(study: optuna.Study, trials: Iterable[Trial], distributions: dict[str, BaseDistribution],
                ) -> dict[int, int]:
    """Every trial as RUNNING with its hyperparameters; its number -> Optuna's trial id."""
    ids: dict[int, int] = {}
    for trial in trials:
        params = {name: trial.hparams[name] for name in distributions
                  if name in trial.hparams and _within(distributions[name], trial.hparams[name])}
        study.add_trial(create_trial(state=OptunaState.RUNNING, params=params,
                                     distributions={name: distributions[name] for name in params}))
        ids[trial.number] = study.get_trials(deepcopy=False)[-1]._trial_id
    return ids


def _within(distribution: BaseDistribution, value: Any) -> bool:
    """A stored value still inside its space (a record that is not is kept out of the study, not fatal)."""
    try:
        return distribution._contains(distribution.to_internal_repr(value))
    except (TypeError, ValueError):
        return False


def _replay(study: optuna.Study, experiment: Experiment, trials: Sequence[Trial], ids: Mapping[int, int]) -> set[int]:
    """Every report of the searcher's metric, in the order reports arrived, through the pruner as Optuna's
    ``trial.report(); trial.should_prune()`` would have seen it; the numbers of the trials it pruned."""
    searcher = experiment.searcher
    if not searcher.name.stops_early:
        return set()
    reports = sorted(((r.seq, r.step, t.number, r) for t in trials for r in _at_rungs(experiment, t)),
                     key=lambda item: item[:3])
    storage, pruner = study._storage, study.pruner
    pruned: set[int] = set()
    for _, step, number, report in reports:
        time = step if searcher.time_metric == "step" else report.values.get(searcher.time_metric)
        if number in pruned or time is None:
            continue
        storage.set_trial_intermediate_value(ids[number], int(time), report.values[searcher.metric])
        if pruner.prune(study, storage.get_trial(ids[number])):
            pruned.add(number)
    return pruned


def _at_rungs(experiment: Experiment, trial: Trial) -> list[Report]:
    """The trial's reports the pruner acts on: of the searcher's metric, the first at or past each rung (those
    between rungs return "go on" and change nothing: skipping them is the same replay, at a fraction of its cost)."""
    searcher = experiment.searcher
    rungs = searcher.rungs

    def time_of(report: Report) -> float | None:
        return report.step if searcher.time_metric == "step" else report.values.get(searcher.time_metric)

    timed = sorted(((t, r) for r in trial.reports if searcher.metric in r.values and (t := time_of(r)) is not None),
                   key=lambda item: (item[0], item[1].step))
    kept, passed = [], 0  # rungs reached so far
    for at, report in timed:
        reached = sum(1 for rung in rungs if rung <= at)
        if reached > passed:
            kept.append(report)
            passed = reached
    return kept


def _finish(study: optuna.Study, experiment: Experiment, trials: Iterable[Trial], ids: Mapping[int, int]) -> None:
    """Ended trials as Optuna's: COMPLETED with their last value (TPE learns from them), else PRUNED or FAIL."""
    for trial in trials:
        if not trial.state.is_terminal():
            continue
        value = trial.last_value(experiment.searcher.metric)
        if trial.state is TrialState.COMPLETED and value is not None:
            study._storage.set_trial_state_values(ids[trial.number], OptunaState.COMPLETE, [value])
        elif trial.state is TrialState.STOPPED:
            study._storage.set_trial_state_values(ids[trial.number], OptunaState.PRUNED)
        else:
            study._storage.set_trial_state_values(ids[trial.number], OptunaState.FAIL)


def _ask(study: optuna.Study, experiment: Experiment, distributions: dict[str, BaseDistribution], number: int,
         seed: int, point: dict[str, Any] | None) -> NewTrial:
    """A new trial from the sampler, or at the grid ``point`` (enqueued: Optuna's fixed parameters)."""
    study.sampler = _sampler(experiment, number, seed)
    if point is not None:
        study.enqueue_trial(point)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        asked = study.ask(distributions)
    consts = {name: s.val for name, s in experiment.hyperparameters.items() if isinstance(s, ConstSpace)}
    hparams = {name: {**asked.params, **consts}[name] for name in experiment.hyperparameters}
    return NewTrial(number=number, hparams=hparams)
