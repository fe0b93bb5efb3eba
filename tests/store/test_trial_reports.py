"""Trial reports on both backends: idempotent per (trial, step, name) with the first value kept, bounded per trial,
NaN and non-numbers refused with nothing stored, two reporters of one step at once storing it once; curves, latest
and best values, checkpoints."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from pai.domain.errors import InvalidParametersError, NoTrialError
from pai.store import experiments, trial_reports
from pai.store.db import Database
from pai.store.trial_reports import MetricSummary, ReportAnswer


@pytest.fixture
def experiment_id(db: Database) -> int:
    with db.session() as s:
        return experiments.create_experiment(s, "bob", "lr", "default", {}, state="RUNNING").id


@pytest.fixture
def trial_id(db: Database, experiment_id: int) -> int:
    with db.session() as s:
        return experiments.add_trial(s, experiment_id, 0, {"lr": 0.1}, "digest-0", state="RUNNING").id


def report(db: Database, trial_id: int, step: object, values: dict[str, object]) -> ReportAnswer:
    with db.session() as s:
        return trial_reports.report(s, trial_id, step, values)


def curves(db: Database, trial_id: int) -> dict[str, list[tuple[int, float]]]:
    with db.session() as s:
        return trial_reports.series(s, trial_id)


def points(db: Database, trial_id: int) -> int:
    with db.session() as s:
        return experiments.get_trial(s, trial_id).points


def test_a_step_reported_again_keeps_its_first_values_and_adds_new_names(db: Database, trial_id: int) -> None:
    assert report(db, trial_id, 1, {"loss": 0.9, "acc": 0.1}) == ReportAnswer(2, False)
    assert report(db, trial_id, 2, {"loss": 0.5}) == ReportAnswer(1, False)
    # a resumed trial reports steps 1 and 2 again, with other values (its restored state differs a little)
    assert report(db, trial_id, 1, {"loss": 0.8, "acc": 0.2}) == ReportAnswer(0, False)
    assert report(db, trial_id, 2, {"loss": 0.4, "lr": 0.1}) == ReportAnswer(1, False)
    assert curves(db, trial_id) == {"acc": [(1, 0.1)], "loss": [(1, 0.9), (2, 0.5)], "lr": [(2, 0.1)]}
    assert points(db, trial_id) == 4


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), "0.5", None, True, [1.0]])
def test_a_value_that_is_not_a_finite_number_is_refused_and_nothing_of_its_report_stored(
        db: Database, trial_id: int, value: object) -> None:
    with pytest.raises(InvalidParametersError) as refused:
        report(db, trial_id, 3, {"acc": 0.5, "loss": value})
    assert refused.value.status == 400 and refused.value.field == "metrics.loss"
    assert refused.value.message.startswith("metrics.loss: must be a finite number")
    assert curves(db, trial_id) == {} and points(db, trial_id) == 0
    assert report(db, trial_id, 3, {"acc": 0.5, "loss": 1}) == ReportAnswer(2, False)  # the trial goes on


@pytest.mark.parametrize(("step", "values", "field"), [
    (-1, {"loss": 1.0}, "step"), (1.5, {"loss": 1.0}, "step"), (True, {"loss": 1.0}, "step"),
    ("3", {"loss": 1.0}, "step"), (1, {}, "metrics"), (1, {"": 1.0}, "metrics"), (1, {"x" * 256: 1.0}, "metrics"),
])
def test_a_bad_step_or_name_is_refused(db: Database, trial_id: int, step: object, values: dict[str, object],
                                       field: str) -> None:
    with pytest.raises(InvalidParametersError) as refused:
        report(db, trial_id, step, values)
    assert refused.value.field == field and curves(db, trial_id) == {}


def test_a_report_of_no_trial_is_refused(db: Database, trial_id: int) -> None:
    with pytest.raises(NoTrialError):
        report(db, trial_id + 100, 1, {"loss": 1.0})


def test_a_trial_keeps_a_bounded_number_of_values(db: Database, trial_id: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trial_reports, "MAX_POINTS_PER_TRIAL", 5)
    report(db, trial_id, 1, {"loss": 1.0, "acc": 0.0})
    report(db, trial_id, 2, {"loss": 0.9, "acc": 0.1})
    with pytest.raises(InvalidParametersError) as refused:
        report(db, trial_id, 3, {"loss": 0.8, "acc": 0.2})  # would make 6
    assert "at most 5 metric values" in refused.value.message and refused.value.status == 400
    assert points(db, trial_id) == 4 and 3 not in [step for step, _ in curves(db, trial_id)["loss"]]
    assert report(db, trial_id, 2, {"loss": 0.7, "acc": 0.7}) == ReportAnswer(0, False)  # a repeat is answered
    assert report(db, trial_id, 3, {"loss": 0.8}) == ReportAnswer(1, False)  # the last place
    with pytest.raises(InvalidParametersError):
        report(db, trial_id, 4, {"loss": 0.7})
    assert points(db, trial_id) == 5 and sum(len(c) for c in curves(db, trial_id).values()) == 5


def test_two_reporters_of_one_step_at_once_store_it_once(db: Database, trial_id: int) -> None:
    # PostgreSQL: API workers report at once; SQLite: the master's one writer thread serialises them (as here)
    threads = 1 if db.dialect == "sqlite" else 8
    barrier = threading.Barrier(threads)

    def one(i: int) -> int:
        barrier.wait()
        return report(db, trial_id, 7, {"loss": float(i), "acc": float(i)}).stored

    with ThreadPoolExecutor(threads) as pool:
        stored = list(pool.map(one, range(8)))
    assert sorted(stored) == [0] * 7 + [2] and points(db, trial_id) == 2
    loss, acc = curves(db, trial_id)["loss"], curves(db, trial_id)["acc"]
    assert len(loss) == 1 and loss == acc  # both values of one report, whichever came first


def test_reporters_of_different_steps_at_once_count_every_value(db: Database, trial_id: int) -> None:
    threads = 1 if db.dialect == "sqlite" else 8
    barrier = threading.Barrier(threads)

    def one(step: int) -> int:
        barrier.wait()
        return report(db, trial_id, step % 4, {"loss": 1.0, f"m{step}": 1.0}).stored

    with ThreadPoolExecutor(threads) as pool:
        stored = list(pool.map(one, range(8)))
    assert sum(stored) == points(db, trial_id) == 4 + 8


@pytest.mark.parametrize("smaller", [True, False, None], ids=["smaller is better", "larger is better", "unsaid"])
def test_latest_and_best_values_and_every_trials_curve(db: Database, smaller: bool | None) -> None:
    """Each trial's latest and best value of its searcher's metric are kept by its reports, in any order, repeated
    ones adding nothing; one by one (``report``) or together (``report_many``, which reads the direction out of the
    spec in SQL). A spec that does not say: smaller is better."""
    searcher = {"name": "random", "metric": "loss", "maxTrials": 3}
    spec = {"searcher": searcher if smaller is None else {**searcher, "smallerIsBetter": smaller}}
    with db.session() as s:
        experiment_id = experiments.create_experiment(s, "bob", "lr", "default", spec, state="ACTIVE").id
        trial_id, other, silent = (experiments.add_trial(s, experiment_id, n, {}, f"digest-{n}", state="RUNNING").id
                                   for n in range(3))
        trial_reports.report(s, silent, 1, {"acc": 0.5})  # reports another metric only
    for step, loss in [(3, 0.3), (1, 0.9), (4, 0.6), (2, 0.3), (2, 0.0)]:  # out of order; step 2 again: kept 0.3
        report(db, trial_id, step, {"loss": loss, "acc": 1.0})
    with db.engine.begin() as c:
        now = time.time()
        trial_reports.report_many(c, [trial_reports.Incoming("digest-1", other, step, {"loss": loss}, now)
                                      for step, loss in [(2, 2.5), (1, 2.0), (2, 9.0)]])
    with db.session() as s:
        got = trial_reports.summaries(s, experiment_id)
        if smaller is not False:
            assert got == {trial_id: MetricSummary(4, 0.6, 2, 0.3), other: MetricSummary(2, 2.5, 1, 2.0)}
        else:
            assert got == {trial_id: MetricSummary(4, 0.6, 1, 0.9), other: MetricSummary(2, 2.5, 2, 2.5)}
        assert trial_reports.experiment_series(s, experiment_id, "loss") == {
            trial_id: [(1, 0.9), (2, 0.3), (3, 0.3), (4, 0.6)], other: [(1, 2.0), (2, 2.5)]}
        assert trial_reports.series(s, silent, "loss") == {}


def test_checkpoints_latest_by_step_and_the_same_step_replaced(db: Database, trial_id: int) -> None:
    with db.session() as s:
        assert trial_reports.latest_checkpoint(s, trial_id) is None
        trial_reports.add_checkpoint(s, trial_id, 10, "/ckpt/10", {"epoch": 1}, now=1.0)
        trial_reports.add_checkpoint(s, trial_id, 20, "/ckpt/20", {"epoch": 2}, now=2.0)
        trial_reports.add_checkpoint(s, trial_id, 10, "/ckpt/10b", {"epoch": 1, "again": True}, now=3.0)
    with db.session() as s:
        latest = trial_reports.latest_checkpoint(s, trial_id)
        assert latest is not None and (latest.step, latest.path, latest.metadata) == (20, "/ckpt/20", {"epoch": 2})
        assert [(c.step, c.path, c.metadata, c.created_at) for c in trial_reports.checkpoints_of(s, trial_id)] == [
            (10, "/ckpt/10b", {"epoch": 1, "again": True}, 3.0), (20, "/ckpt/20", {"epoch": 2}, 2.0)]
        with pytest.raises(InvalidParametersError):
            trial_reports.add_checkpoint(s, trial_id, 30, "", {})
        with pytest.raises(NoTrialError):
            trial_reports.add_checkpoint(s, trial_id + 100, 30, "/x", {})


def test_progress_counts_the_rungs_its_trials_reached_not_every_report(db: Database) -> None:
    """Successive halving judges a trial at its rungs (steps 4 and 16 here): with them, an experiment's progress
    moves when a trial's latest step of the searcher's metric reaches one, not at each report between."""
    with db.session() as s:
        eid = experiments.create_experiment(s, "bob", "sh", "default", {"searcher": {"metric": "loss"}},
                                            state="RUNNING").id
        tid = experiments.add_trial(s, eid, 0, {}, "digest-r", state="RUNNING").id

    def now() -> tuple[int, int]:
        with db.session() as s:
            return experiments.progress(s, eid, (4, 16)).points, experiments.progress(s, eid).points

    seen = []
    for step, values in ((1, {"loss": 1.0}), (3, {"loss": 1.0}), (4, {"loss": 1.0}), (5, {"loss": 1.0}),
                         (20, {"acc": 0.5}), (15, {"loss": 1.0}), (16, {"loss": 1.0}), (40, {"loss": 1.0})):
        report(db, tid, step, values)
        seen.append(now())
    # (rungs reached, values reported): another metric's report, even past a rung, reaches none
    assert seen == [(0, 1), (0, 2), (1, 3), (1, 4), (1, 5), (1, 6), (2, 7), (2, 8)]
