"""Reports stored together (``trial_reports.report_many``) answer what each alone would have: on both backends,
tokens found in one query, a key reported twice in a batch stored once, another trial's token and a token that is
no trial's told apart, a trial near its cap handled one report at a time; two batches at once over the same trials
in opposite orders never deadlock."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from pai.domain.errors import InvalidParametersError
from pai.store import experiments, trial_reports
from pai.store.db import Database
from pai.store.trial_reports import Incoming, NotATrialToken, OtherTrialToken, ReportAnswer


@pytest.fixture
def trials(db: Database) -> list[int]:
    with db.session() as s:
        exp = experiments.create_experiment(s, "bob", "lr", "default", {}, state="ACTIVE")
        ids = [experiments.add_trial(s, exp.id, n, {}, f"digest-{n}", state="RUNNING").id for n in range(3)]
        experiments.request_trial_stop(s, ids[2], "searcher")
    return ids


def item(trial: int, digest: str, step: int, **values: float) -> Incoming:
    return Incoming(digest, trial, step, values, time.time())


def batch(db: Database, items: list[Incoming]) -> list[object]:
    with db.engine.begin() as c:  # as the app's batches (pai.rest_server.reports)
        return list(trial_reports.report_many(c, items))


def test_each_report_of_a_batch_gets_its_own_answer(db: Database, trials: list[int]) -> None:
    a, b, c = trials
    answers = batch(db, [
        item(a, "digest-0", 1, loss=0.5, acc=0.1),
        item(b, "digest-1", 1, loss=0.7),
        item(a, "digest-0", 1, loss=9.0),  # the same key again in the batch: the first value stays
        item(c, "digest-2", 4, loss=0.2),  # a trial the searcher stopped: told so
        item(a, "digest-1", 2, loss=0.1),  # another trial's token
        item(a, "nobody", 2, loss=0.1),  # no trial's token
    ])
    assert answers[:4] == [ReportAnswer(2, False), ReportAnswer(1, False), ReportAnswer(0, False),
                           ReportAnswer(1, True)]
    assert isinstance(answers[4], OtherTrialToken) and answers[4].args == (b,)
    assert isinstance(answers[5], NotATrialToken)
    with db.session() as s:
        assert trial_reports.series(s, a) == {"acc": [(1, 0.1)], "loss": [(1, 0.5)]}
        assert [t.points for t in experiments.trials_of(s, experiments.get_trial(s, a).experiment_id)] == [2, 1, 1]
    assert batch(db, [item(a, "digest-0", 1, loss=3.0)]) == [ReportAnswer(0, False)]  # and in a later batch


def test_a_trial_near_its_cap_is_handled_one_report_at_a_time(db: Database, trials: list[int],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trial_reports, "MAX_POINTS_PER_TRIAL", 3)
    a, b, _ = trials
    answers = batch(db, [item(a, "digest-0", 1, loss=1.0, acc=1.0), item(a, "digest-0", 2, loss=1.0, acc=1.0),
                         item(b, "digest-1", 1, loss=1.0)])
    assert answers[0] == ReportAnswer(2, False) and answers[2] == ReportAnswer(1, False)
    assert isinstance(answers[1], InvalidParametersError)  # refused whole: the trial keeps 3 values at most
    with db.session() as s:
        assert trial_reports.series(s, a) == {"acc": [(1, 1.0)], "loss": [(1, 1.0)]}


@pytest.mark.parametrize("kind", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True)
def test_two_batches_at_once_over_the_same_trials_never_deadlock(db: Database, trials: list[int]) -> None:
    """API workers on PostgreSQL store batches side by side: each takes its trials' rows in one order. (On SQLite
    the master's one writer thread stores every batch.)"""
    a, b, _ = trials
    start = threading.Barrier(2)

    def run(order: list[tuple[int, str]], offset: int) -> None:
        start.wait()
        for step in range(offset, offset + 40):
            batch(db, [item(t, d, step, loss=0.5) for t, d in order])

    with ThreadPoolExecutor(2) as pool:
        done = [pool.submit(run, [(a, "digest-0"), (b, "digest-1")], 0),
                pool.submit(run, [(b, "digest-1"), (a, "digest-0")], 1000)]
        for future in done:
            future.result(timeout=120)
    with db.session() as s:
        assert len(trial_reports.series(s, a)["loss"]) == 80 and len(trial_reports.series(s, b)["loss"]) == 80
