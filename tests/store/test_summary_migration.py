"""Migration 0020 on a database with trials that reported before it: their latest and best values of their
searcher's metric are computed once, so an experiment's view shows them as it did (both backends)."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import text

from pai.store import migrations, trial_reports
from pai.store.trial_reports import MetricSummary

from .conftest import Kind, make_database


def test_trials_that_reported_before_0020_have_their_summaries(kind: Kind, tmp_path: Path) -> None:
    spec = {"searcher": {"name": "random", "metric": "loss", "maxTrials": 2, "smallerIsBetter": False}}
    with make_database(kind, tmp_path, migrate=False) as db:
        with db.engine.begin() as c:
            migrations.upgrade(c, "0019")
            c.execute(text("INSERT INTO experiments (id, user_name, name, vc, spec, state, created_at) "
                           "VALUES (1, 'bob', 'lr', 'default', :spec, 'ACTIVE', 1)"), {"spec": json.dumps(spec)})
            for trial in (1, 2):
                c.execute(text("INSERT INTO trials (id, experiment_id, number, hparams, state, token_hash, "
                               "created_at) VALUES (:t, 1, :n, '{}', 'RUNNING', :h, 1)"),
                          {"t": trial, "n": trial - 1, "h": f"digest-{trial}"})
            for step, value in ((1, 0.5), (2, 0.9), (3, 0.7), (4, 0.9)):
                c.execute(text("INSERT INTO trial_metrics (trial_id, step, name, value) VALUES (1, :s, 'loss', :v)"),
                          {"s": step, "v": value})
            c.execute(text("INSERT INTO trial_metrics (trial_id, step, name, value) VALUES (2, 1, 'acc', 1.0)"))
        db.migrate()
        with db.session() as s:
            assert trial_reports.summaries(s, 1) == {1: MetricSummary(4, 0.9, 2, 0.9)}  # trial 2: no loss
