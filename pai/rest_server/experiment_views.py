"""What the experiments API answers: an experiment's summary (the list), its detail (with its trials), a trial.

Times are epoch milliseconds, as the jobs API writes them. A trial's ``latest`` and ``best`` are of the searcher's
metric (``pai.store.trial_reports.summaries``); the experiment's ``bestTrial`` is the trial with the best value of it
(smaller or larger, as the searcher says), ties to the lower trial number.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy.orm import Session

from pai.domain.experiment import TrialState
from pai.store import experiments as store
from pai.store import trial_reports
from pai.store.trial_reports import MetricSummary


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def _point(step: int, value: float) -> dict[str, Any]:
    return {"step": step, "value": value}


def trial_view(trial: store.Trial, job_key: str | None, summary: MetricSummary | None) -> dict[str, Any]:
    return {
        "id": trial.id,
        "number": trial.number,
        "jobName": job_key,
        "hparams": trial.hparams,
        "state": trial.state,
        "stoppedBy": trial.stopped_by if trial.state == TrialState.STOPPED else None,
        "stopRequested": trial.stop_requested,
        "latest": None if summary is None else _point(summary.latest_step, summary.latest),
        "best": None if summary is None else _point(summary.best_step, summary.best),
        "points": trial.points,
        "createdTime": _ms(trial.created_at),
    }


def _best(trials: list[dict[str, Any]], smaller_is_better: bool) -> dict[str, Any] | None:
    scored = [t for t in trials if t["best"] is not None]
    if not scored:
        return None
    sign = 1 if smaller_is_better else -1
    best = min(scored, key=lambda t: (sign * t["best"]["value"], t["number"]))
    return {key: best[key] for key in ("id", "number", "jobName", "hparams", "state")} | {"metric": best["best"]}


def experiment_view(s: Session, row: store.Experiment, *, detail: bool) -> dict[str, Any]:
    """The experiment as the list (``detail`` False) or its page shows it."""
    searcher = dict(row.spec["searcher"])
    smaller = bool(searcher.get("smallerIsBetter", True))
    # the trials first: each statement of a PostgreSQL read sees what was committed when it began, and a trial is
    # committed with its job, so the keys and summaries read after cover every trial read (CI saw a None jobName)
    rows = store.trials_of(s, row.id)
    summaries = trial_reports.summaries(s, row.id)
    keys = store.job_keys(s, row.id)
    trials = [trial_view(t, keys.get(t.id), summaries.get(t.id)) for t in rows]
    view: dict[str, Any] = {
        "name": row.name,
        "username": row.user,
        "key": row.key,
        "state": row.state,
        "virtualCluster": row.vc,
        "searcher": searcher,
        "createdTime": _ms(row.created_at),
        "completedTime": _ms(row.ended_at),
        "trialCounts": dict(Counter(t["state"] for t in trials)),
        "bestTrial": _best(trials, smaller),
    }
    if detail:
        view |= {"hyperparameters": row.spec["hyperparameters"], "description": row.spec.get("description", ""),
                 "stopRequested": row.stop_requested, "trials": trials, "config": row.spec}
    return view


def series_view(trial: store.Trial, experiment: store.Experiment,
                curves: dict[str, list[tuple[int, float]]]) -> dict[str, Any]:
    return {"trialId": trial.id, "experiment": experiment.key, "number": trial.number,
            "metrics": {name: [[step, value] for step, value in points] for name, points in curves.items()}}


def checkpoint_view(checkpoint: trial_reports.Checkpoint | None) -> dict[str, Any] | None:
    if checkpoint is None:
        return None
    return {"step": checkpoint.step, "path": checkpoint.path, "metadata": checkpoint.metadata,
            "createdTime": _ms(checkpoint.created_at)}
