"""The searcher's pure core: new trials within maxConcurrentTrials and maxTrials, a grid enumerated once, ASHA's
stops at its rungs, completion, and the same decisions from the same records (a master restart)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from pai.domain.experiment import (
    CategoricalSpace,
    ConstSpace,
    DoubleSpace,
    Experiment,
    IntSpace,
    LogSpace,
    Report,
    Searcher,
    SearcherName,
    Space,
    StoppedBy,
    Trial,
    TrialState,
)
from pai.launcher import experiments as runner
from pai.launcher.searcher import NewTrial, SearchDecision, decide

SPACES: dict[str, Space] = {"lr": LogSpace(1e-4, 1.0), "x": DoubleSpace(0.0, 1.0), "layers": IntSpace(1, 4),
                            "opt": CategoricalSpace(("sgd", "adam")), "batch": ConstSpace(64)}
RUNNING, WAITING, COMPLETED, STOPPED, FAILED = (TrialState.RUNNING, TrialState.WAITING, TrialState.COMPLETED,
                                                TrialState.STOPPED, TrialState.FAILED)


def exp(name: str = "random", max_trials: int = 8, concurrent: int = 2, spaces: Mapping[str, Space] = SPACES,
        **searcher: Any) -> Experiment:
    return Experiment("e", Searcher(SearcherName(name), "loss", max_trials, max_concurrent_trials=concurrent,
                                    **searcher), spaces)


def trial(number: int, state: TrialState = RUNNING, *losses: tuple[int, float, int], **hparams: Any) -> Trial:
    """A trial with reports ``(step, loss, seq)``."""
    reports = tuple(Report(step, {"loss": loss}, seq) for step, loss, seq in losses)
    return Trial(number, hparams or {"x": 0.5}, state, reports)


ASHA_SPACES: dict[str, Space] = {"x": DoubleSpace(0.0, 1.0)}


def asha(max_trials: int = 16, concurrent: int = 4, **over: Any) -> Experiment:
    """ASHA over 16 steps, halving: rungs at steps 4, 8 and 16."""
    return exp("asha", max_trials, concurrent, ASHA_SPACES, **{"max_time": 16, "divisor": 2, **over})


@dataclass
class Case:
    name: str
    experiment: Experiment
    trials: list[Trial]
    new: list[int]  # numbers of the new trials
    stop: list[int] = field(default_factory=list)
    complete: bool = False


CASES = [
    Case("a new experiment starts maxConcurrentTrials trials", exp(concurrent=3), [], [0, 1, 2]),
    Case("running and waiting trials count against maxConcurrentTrials", exp(concurrent=3),
         [trial(0), trial(1, WAITING)], [2]),
    Case("a trial being stopped still counts", exp(concurrent=2),
         [replace(trial(0), stop_requested=True), trial(1)], []),
    Case("ended trials free their places; numbers continue after the last", exp(concurrent=2),
         [trial(0, COMPLETED), trial(1, FAILED), trial(4, STOPPED), trial(5)], [6]),
    Case("no more than maxTrials trials", exp(max_trials=3, concurrent=4), [trial(0, COMPLETED), trial(1)], [2]),
    Case("at maxTrials, the experiment waits for its running trials", exp(max_trials=2),
         [trial(0, COMPLETED), trial(1)], []),
    Case("complete when maxTrials trials ended, failed ones included", exp(max_trials=3),
         [trial(0, COMPLETED), trial(1, FAILED), trial(2, STOPPED)], [], complete=True),
    Case("a stored value outside its space is left out, not fatal", exp(concurrent=2),
         [Trial(0, {"x": 7, "layers": "many", "opt": "rmsprop"}, RUNNING)], [1]),
    Case("asha: the first trial at a rung goes on", asha(), [trial(0, RUNNING, (4, 0.5, 1))], [1, 2, 3]),
    Case("asha: a trial worse than the top half at a rung stops", asha(),
         [trial(0, RUNNING, (4, 0.5, 1)), trial(1, RUNNING, (4, 0.9, 2)), trial(2, RUNNING, (4, 0.1, 3)),
          trial(3, RUNNING, (4, 0.3, 4))], [], stop=[1]),
    Case("asha: larger is better", asha(smaller_is_better=False),
         [trial(0, RUNNING, (4, 0.5, 1)), trial(1, RUNNING, (4, 0.9, 2)), trial(2, RUNNING, (4, 0.1, 3)),
          trial(3, RUNNING, (4, 0.3, 4))], [], stop=[2, 3]),
    Case("asha: judged against the trials that reached the rung before it (arrival order)", asha(),
         [trial(0, RUNNING, (4, 0.5, 2)), trial(1, RUNNING, (4, 0.9, 1))], [2, 3]),
    Case("asha: not judged between rungs", asha(),
         [trial(0, RUNNING, (3, 0.1, 1)), trial(1, RUNNING, (3, 0.9, 2))], [2, 3]),
    Case("asha: a later rung", asha(),
         [trial(0, RUNNING, (4, 0.5, 1), (8, 0.4, 3)), trial(1, RUNNING, (4, 0.4, 2), (8, 0.45, 4))], [2, 3],
         stop=[1]),
    Case("asha: on another time axis, a metric the trials report", asha(time_metric="batches", max_time=160),
         [Trial(0, {"x": 0.5}, RUNNING, (Report(1, {"loss": 0.5, "batches": 40}, 1),)),
          Trial(1, {"x": 0.5}, RUNNING, (Report(1, {"loss": 0.9, "batches": 40}, 2),)),
          Trial(2, {"x": 0.5}, RUNNING, (Report(3, {"loss": 0.1, "batches": 39}, 3),)),
          Trial(3, {"x": 0.5}, RUNNING, (Report(2, {"loss": 0.95}, 4),))], [], stop=[1]),
    Case("asha: a trial already being stopped is not stopped again", asha(),
         [trial(0, RUNNING, (4, 0.5, 1)), replace(trial(1, RUNNING, (4, 0.9, 2)), stop_requested=True)], [2, 3]),
    Case("asha: ended trials compete but are not stopped", asha(),
         [trial(0, COMPLETED, (4, 0.5, 1), (16, 0.2, 3)), trial(1, FAILED, (4, 0.9, 2)),
          trial(2, RUNNING, (4, 0.7, 4))], [3, 4, 5], stop=[2]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_decisions(case: Case) -> None:
    decision = decide(case.experiment, case.trials, seed=1)
    assert [t.number for t in decision.new_trials] == case.new
    assert list(decision.stop) == case.stop
    assert decision.complete is case.complete


def test_new_trials_take_every_hyperparameter_within_its_space() -> None:
    for new in decide(exp(concurrent=8), [], seed=3).new_trials:
        hp = new.hparams
        assert set(hp) == set(SPACES)
        assert 1e-4 <= hp["lr"] <= 1.0 and 0.0 <= hp["x"] <= 1.0 and hp["layers"] in range(1, 5)
        assert hp["opt"] in ("sgd", "adam") and hp["batch"] == 64


# A simulated cluster: every round each running trial reports one more step of its curve, a trial at maxTime
# completes, the searcher's stops end trials as STOPPED by the searcher, its new trials start.
Curve = Callable[[Mapping[str, Any], int], float]


def run(experiment: Experiment, curve: Curve, seed: int = 7, rounds: int = 1_000, restart_at: int | None = None,
        ) -> tuple[list[Trial], list[SearchDecision]]:
    trials: dict[int, Trial] = {}
    decisions: list[SearchDecision] = []
    seq = 0
    length = experiment.searcher.max_time or 3
    for round_ in range(rounds):
        if round_ == restart_at:
            trials = {t.number: t for t in _reloaded(list(trials.values()))}
        decision = decide(experiment, list(trials.values()), seed)
        decisions.append(decision)
        if decision.complete:
            return sorted(trials.values(), key=lambda t: t.number), decisions
        for number in decision.stop:
            trials[number] = replace(trials[number], state=STOPPED, stopped_by=StoppedBy.SEARCHER)
        for new in decision.new_trials:
            assert new.number not in trials
            trials[new.number] = Trial(new.number, new.hparams, RUNNING)
        searcher = experiment.searcher
        assert sum(t.state.is_active() for t in trials.values()) <= searcher.max_concurrent_trials
        assert len(trials) <= searcher.max_trials
        for number, t in sorted(trials.items()):
            if t.state is RUNNING:
                seq += 1
                step = len(t.reports) + 1
                report = Report(step, {"loss": curve(t.hparams, step)}, seq)
                trials[number] = replace(t, reports=(*t.reports, report),
                                         state=COMPLETED if step >= length else RUNNING)
    raise AssertionError("the experiment did not complete")


def _reloaded(trials: list[Trial]) -> list[Trial]:
    """The trials as a restarted master reads them back: through JSON, in the store's order, not ours."""
    rows = json.loads(json.dumps([{"number": t.number, "hparams": t.hparams, "state": t.state.value,
                                   "reports": [[r.step, dict(r.values), r.seq] for r in t.reports],
                                   "stopped_by": t.stopped_by, "stop_requested": t.stop_requested}
                                  for t in trials]))
    random.Random(0).shuffle(rows)
    return [Trial(row["number"], row["hparams"], TrialState(row["state"]),
                  tuple(Report(s, v, q) for s, v, q in reversed(row["reports"])),
                  StoppedBy(row["stopped_by"]) if row["stopped_by"] else None, row["stop_requested"])
            for row in rows]


def _canonical(trials: list[Trial]) -> list[Trial]:
    return [replace(t, reports=tuple(sorted(t.reports, key=lambda r: r.seq)))
            for t in sorted(trials, key=lambda t: t.number)]


def flat(hparams: Mapping[str, Any], step: int) -> float:
    return float(hparams["x"])


def test_random_respects_max_concurrent_trials_and_max_trials_and_completes() -> None:
    trials, decisions = run(exp(max_trials=10, concurrent=3), flat)
    assert [t.number for t in trials] == list(range(10))
    assert all(t.state is COMPLETED for t in trials)
    assert len({json.dumps(t.hparams, sort_keys=True) for t in trials}) == 10  # never one proposed twice
    assert len(decisions[0].new_trials) == 3  # run() checks that never more than 3 are active
    assert decisions[-1].complete and not decisions[-2].complete


def test_grid_enumerates_every_point_once_then_completes() -> None:
    spaces: dict[str, Space] = {"layers": IntSpace(1, 3), "x": DoubleSpace(0.0, 1.0, count=2),
                                "opt": CategoricalSpace(("sgd", "adam")), "batch": ConstSpace(64)}
    trials, decisions = run(exp("grid", max_trials=100, concurrent=5, spaces=spaces), flat)
    points = sorted((t.hparams["layers"], t.hparams["x"], t.hparams["opt"]) for t in trials)
    assert points == sorted((n, x, o) for n in (1, 2, 3) for x in (0.0, 1.0) for o in ("sgd", "adam"))
    assert all(t.hparams["batch"] == 64 for t in trials)
    assert decisions[-1].complete


def test_grid_stops_at_max_trials() -> None:
    trials, _ = run(exp("grid", max_trials=4, concurrent=3, spaces={"layers": IntSpace(1, 9)}),
                    lambda hparams, step: float(hparams["layers"]))
    assert len(trials) == 4 and len({t.hparams["layers"] for t in trials}) == 4


def converging(hparams: Mapping[str, Any], step: int) -> float:
    """A learning curve whose final loss is x: the smaller x, the better the trial at every step."""
    return float(hparams["x"]) + 1.0 / step


def test_asha_stops_the_worst_trials_at_rungs_and_keeps_the_best() -> None:
    experiment = asha(max_trials=24, concurrent=4)
    trials, _ = run(experiment, converging)
    stopped = [t for t in trials if t.state is STOPPED]
    completed = [t for t in trials if t.state is COMPLETED]
    best = min(trials, key=lambda t: t.hparams["x"])
    assert best.state is COMPLETED
    assert len(stopped) >= len(trials) // 2  # most trials never run to maxTime
    assert all(t.stopped_by is StoppedBy.SEARCHER for t in stopped)
    assert {len(t.reports) for t in stopped} <= {4, 8}  # stopped right at a rung
    assert min(t.hparams["x"] for t in completed) == best.hparams["x"]


def test_the_same_records_give_the_same_decision() -> None:
    records = [trial(0, RUNNING, (4, 0.5, 1), x=0.5, layers=1), trial(1, RUNNING, (4, 0.9, 2), x=0.9, layers=2),
               trial(2, COMPLETED, (4, 0.1, 3), x=0.1, layers=3)]
    spaces: dict[str, Space] = {"x": DoubleSpace(0.0, 1.0), "layers": IntSpace(1, 9)}
    grid: dict[str, Space] = {"x": DoubleSpace(0.0, 1.0, count=11), "layers": IntSpace(1, 9)}
    for experiment in (exp(concurrent=4, spaces=spaces), exp("tpe", concurrent=4, spaces=spaces),
                       asha(concurrent=4), exp("grid", concurrent=4, spaces=grid)):
        first = decide(experiment, records, seed=5)
        assert decide(experiment, _reloaded(records), seed=5) == first
        assert first.new_trials


def test_hyperband_stops_poor_trials_and_keeps_the_best() -> None:
    experiment = exp("hyperband", 16, 4, ASHA_SPACES, max_time=32, divisor=2)  # brackets from step 8 on
    trials, _ = run(experiment, converging)
    stopped = [t for t in trials if t.state is STOPPED]
    best = min(trials, key=lambda t: t.hparams["x"])
    assert best.state is COMPLETED and stopped
    assert all(len(t.reports) in (8, 16, 32) for t in stopped)  # at a rung of some bracket


@pytest.mark.parametrize("name", ["random", "tpe", "asha", "hyperband", "grid"])
def test_a_restart_mid_experiment_makes_the_same_further_decisions(name: str) -> None:
    spaces: dict[str, Space] = {"x": DoubleSpace(0.0, 1.0, count=12), "batch": ConstSpace(64)}
    experiment = exp(name, max_trials=12, concurrent=3, spaces=spaces, max_time=16, divisor=2)
    trials, decisions = run(experiment, converging)
    for restart_at in (5, 17):
        again, redecided = run(experiment, converging, restart_at=restart_at)
        assert redecided == decisions
        assert _canonical(again) == _canonical(trials)


def noisy_trials(n: int, steps: int) -> list[Trial]:
    rng = random.Random(0)
    return [Trial(i, {"x": rng.random()}, RUNNING,
                  tuple(Report(s, {"loss": converging({"x": 0.5}, s) + rng.random() / 10}, s * n + i)
                        for s in range(1, steps + 1)))
            for i in range(n)]


@pytest.mark.parametrize("name", ["asha", "hyperband"])
def test_only_the_reports_at_rungs_matter(name: str) -> None:
    """The searcher replays each trial's first report at or past each rung: dropping every other report (as a
    store that keeps only those would) gives the same decision."""
    experiment = exp(name, 200, 100, ASHA_SPACES, max_time=100, divisor=4)
    trials = noisy_trials(100, 100)
    rungs = experiment.searcher.rungs
    assert rungs == (6, 24, 96)
    only = [replace(t, reports=tuple(r for r in t.reports if r.step in rungs)) for t in trials]
    decision = decide(experiment, trials, seed=1)
    assert decision.stop and decide(experiment, only, seed=1) == decision


def test_grid_never_repeats_a_point_that_a_trial_holds_whatever_its_number() -> None:
    """Points are taken by value (records written under another Optuna's shuffle of the grid stay taken)."""
    experiment = exp("grid", max_trials=9, concurrent=9, spaces={"layers": IntSpace(1, 5)})
    for held in ([1, 2], [5, 4], [3, 1], [2, 5, 4, 1]):
        records = [Trial(n, {"layers": value}, RUNNING) for n, value in enumerate(held)]
        new = [t.hparams["layers"] for t in decide(experiment, records, seed=2).new_trials]
        assert sorted(new) == sorted(set(range(1, 6)) - set(held)), held


def test_a_decision_is_sliced_stops_first_and_only_the_last_slice_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "STOP_SLICE", 4)
    monkeypatch.setattr(runner, "NEW_TRIAL_SLICE", 2)
    new = tuple(NewTrial(number=n, hparams={"lr": 0.1}) for n in range(10, 13))
    parts = runner.slices(SearchDecision(new_trials=new, stop=(1, 2, 3, 4, 5), complete=True))
    assert [(p.stop, [t.number for t in p.new_trials], p.complete) for p in parts] == [
        ((1, 2, 3, 4), [], False), ((5,), [], False), ((), [10, 11], False), ((), [12], True)]
    only_stops = runner.slices(SearchDecision(stop=(1, 2), complete=True))
    assert [(p.stop, p.new_trials, p.complete) for p in only_stops] == [((1, 2), (), True)]
    assert runner.slices(SearchDecision()) == [SearchDecision()]  # nothing to do: still one (the end is checked)
