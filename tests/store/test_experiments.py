"""Experiments and trials on both backends: created once per user and name, listed per owner, found by a trial's
token digest (never the token), states and stop requests, deleted with their trials' jobs, a trial outliving a job
deleted alone."""

from __future__ import annotations

import pytest

from pai.domain.errors import ConflictExperimentError, NoExperimentError, NoTrialError
from pai.store import credentials, experiments, trial_reports, users
from pai.store import jobs as store_jobs
from pai.store.db import Database

from .builders import job

SPEC = {"searcher": {"name": "asha", "metric": "loss", "smallerIsBetter": True}, "hyperparameters": {}}


@pytest.fixture
def experiment_id(db: Database) -> int:
    with db.session() as s:
        users.create_user(s, "bob", "bob-password")
        return experiments.create_experiment(s, "bob", "lr", "default", SPEC, state="RUNNING", now=10.0).id


def test_an_experiment_is_stored_as_posted_and_its_name_is_the_users_once(db: Database, experiment_id: int) -> None:
    with db.session() as s:
        got = experiments.get_experiment(s, "bob~lr")
        assert (got.id, got.key, got.vc, got.spec, got.state, got.created_at) == (
            experiment_id, "bob~lr", "default", SPEC, "RUNNING", 10.0)
        assert experiments.get_experiment_by_id(s, experiment_id) == got
    with pytest.raises(ConflictExperimentError), db.session() as s:
        experiments.create_experiment(s, "bob", "lr", "default", SPEC, state="RUNNING")
    with db.session() as s:
        experiments.create_experiment(s, "carol", "lr", "default", SPEC, state="RUNNING", now=20.0)
        with pytest.raises(NoExperimentError):
            experiments.get_experiment(s, "bob~nope")
        assert [e.key for e in experiments.list_experiments(s, "bob")] == ["bob~lr"]
        assert [e.key for e in experiments.list_experiments(s)] == ["bob~lr", "carol~lr"]
        experiments.set_experiment_state(s, experiment_id, "SUCCEEDED", ended_at=30.0)
        assert [e.key for e in experiments.list_experiments(s, states=("RUNNING",))] == ["carol~lr"]
        experiments.request_experiment_stop(s, experiment_id)
        done = experiments.get_experiment_by_id(s, experiment_id)
        assert (done.state, done.ended_at, done.stop_requested) == ("SUCCEEDED", 30.0, True)


def test_a_trial_is_found_by_its_tokens_digest_and_numbers_are_unique(db: Database, experiment_id: int) -> None:
    token = credentials.new_token()
    with db.session() as s:
        trial = experiments.add_trial(s, experiment_id, 0, {"lr": 0.1}, credentials.token_digest(token),
                                      state="WAITING", now=11.0)
        experiments.add_trial(s, experiment_id, 1, {"lr": 0.01}, credentials.token_digest("other"), state="WAITING")
    with pytest.raises(ConflictExperimentError), db.session() as s:
        experiments.add_trial(s, experiment_id, 1, {"lr": 0.5}, credentials.token_digest("third"), state="WAITING")
    with db.session() as s:
        assert experiments.trial_by_token(s, credentials.token_digest(token)) == trial
        assert experiments.trial_by_token(s, token) is None  # the token itself is not stored
        assert [t.number for t in experiments.trials_of(s, experiment_id)] == [0, 1]
        assert experiments.get_trial(s, trial.id).hparams == {"lr": 0.1}
        with pytest.raises(NoTrialError):
            experiments.get_trial(s, trial.id + 100)


def test_trial_state_stop_and_job_link(db: Database, experiment_id: int) -> None:
    j = job("lr-trial-0", user="bob")
    with db.session() as s:
        store_jobs.insert_job(s, j, "{}")
        trial = experiments.add_trial(s, experiment_id, 0, {}, "digest", state="WAITING")
        experiments.set_trial_job(s, trial.id, j.id)
        assert experiments.trial_of_job(s, j.id) == experiments.get_trial(s, trial.id)
        assert not trial_reports.report(s, trial.id, 1, {"loss": 1.0}).stop
        experiments.request_trial_stop(s, trial.id)
        assert trial_reports.report(s, trial.id, 2, {"loss": 1.0}).stop
        experiments.set_trial_state(s, trial.id, "STOPPED", stopped_by="searcher")
        got = experiments.get_trial(s, trial.id)
        assert (got.state, got.stopped_by, got.stop_requested, got.job_id) == ("STOPPED", "searcher", True, j.id)
        with pytest.raises(NoTrialError):
            experiments.set_trial_state(s, trial.id + 100, "RUNNING")


def test_the_trials_not_ended_with_their_jobs_and_their_states_set_together(db: Database, experiment_id: int) -> None:
    """What the launcher's tick follows: the trials not ended, each with its job's state and key (none for a trial
    without a job); their new states are written in one statement, each trial's own."""
    j = job("lr-trial-0", user="bob")
    with db.session() as s:
        store_jobs.insert_job(s, j, "{}")
        running = experiments.add_trial(s, experiment_id, 0, {"lr": 0.1}, "d0", state="RUNNING", job_id=j.id)
        waiting = experiments.add_trial(s, experiment_id, 1, {}, "d1", state="WAITING")
        experiments.add_trial(s, experiment_id, 2, {}, "d2", state="COMPLETED")  # ended: not followed
        experiments.request_trial_stop(s, running.id, "searcher")
        assert experiments.unended_trials(s) == [
            experiments.TrialJob(running.id, experiment_id, 0, "RUNNING", "searcher", j.state.value, "bob~lr-trial-0"),
            experiments.TrialJob(waiting.id, experiment_id, 1, "WAITING", None, None, None)]
        experiments.set_trial_states(s, [(running.id, "STOPPED", "searcher"), (waiting.id, "FAILED", None)])
        experiments.set_trial_states(s, [])
        got = {t.number: (t.state, t.stopped_by) for t in experiments.trials_of(s, experiment_id)}
        assert got == {0: ("STOPPED", "searcher"), 1: ("FAILED", None), 2: ("COMPLETED", None)}
        assert experiments.unended_trials(s) == []


def test_an_experiment_goes_with_its_trials_their_reports_and_their_jobs(db: Database, experiment_id: int) -> None:
    first, second = job("lr-trial-0", user="bob"), job("lr-trial-1", user="bob")
    with db.session() as s:
        for number, j in enumerate((first, second)):
            store_jobs.insert_job(s, j, "{}")
            trial = experiments.add_trial(s, experiment_id, number, {}, f"digest-{number}", state="RUNNING",
                                          job_id=j.id)
            trial_reports.report(s, trial.id, 1, {"loss": 1.0})
            trial_reports.add_checkpoint(s, trial.id, 1, "/ckpt/1", {})
        experiments.add_trial(s, experiment_id, 2, {}, "digest-2", state="WAITING")  # no job yet
    with db.session() as s:
        assert sorted(experiments.delete_experiment(s, experiment_id)) == sorted([first.id, second.id])
    with db.session() as s:
        assert not store_jobs.job_exists(s, first.id) and not store_jobs.job_exists(s, second.id)
        assert experiments.trial_by_token(s, "digest-0") is None
        assert experiments.list_experiments(s) == []
        with pytest.raises(NoExperimentError):
            experiments.delete_experiment(s, experiment_id)


def test_a_trials_job_deleted_alone_leaves_the_trial_and_its_curve(db: Database, experiment_id: int) -> None:
    j = job("lr-trial-0", user="bob")
    with db.session() as s:
        store_jobs.insert_job(s, j, "{}")
        trial = experiments.add_trial(s, experiment_id, 0, {}, "digest", state="RUNNING", job_id=j.id)
        trial_reports.report(s, trial.id, 1, {"loss": 1.0})
    with db.session() as s:
        store_jobs.delete_job(s, j.id)
    with db.session() as s:
        assert experiments.get_trial(s, trial.id).job_id is None
        assert trial_reports.series(s, trial.id) == {"loss": [(1, 1.0)]}


def test_progress_reads_the_trials_not_ended_and_counts_every_trial(db: Database, experiment_id: int) -> None:
    """What the searcher decides on: every trial counted, the states of those not ended (an ended trial's states never
    change again); a trial that ends, one asked to stop and a new one each change it."""
    with db.session() as s:
        ids = [experiments.add_trial(s, experiment_id, n, {}, f"digest-p{n}", state="RUNNING").id for n in range(3)]
        before = experiments.progress(s, experiment_id)
        experiments.set_trial_state(s, ids[0], "COMPLETED")
        ended = experiments.progress(s, experiment_id)
        experiments.request_trial_stop(s, ids[1], "searcher")
        asked = experiments.progress(s, experiment_id)
        experiments.add_trial(s, experiment_id, 3, {}, "digest-p3", state="WAITING")
        added = experiments.progress(s, experiment_id)
        other = experiments.create_experiment(s, "bob", "other", "default", SPEC, state="RUNNING").id
        experiments.add_trial(s, other, 0, {}, "digest-o0", state="RUNNING")
    assert before == experiments.Progress(3, 0, ((0, "RUNNING", False), (1, "RUNNING", False), (2, "RUNNING", False)))
    assert ended == experiments.Progress(3, 0, ((1, "RUNNING", False), (2, "RUNNING", False)))
    assert asked.states == ((1, "RUNNING", True), (2, "RUNNING", False))
    assert added.states == ((1, "RUNNING", True), (2, "RUNNING", False), (3, "WAITING", False))
    with db.session() as s:  # another experiment's trials are not this one's
        assert experiments.progress(s, experiment_id) == added
        assert experiments.unended_states(s, experiment_id) == added.states
