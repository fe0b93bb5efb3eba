"""A trial follows its job: the job's state (and who asked the trial to stop) -> the trial's state."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pai.domain.experiment import ExperimentState, StoppedBy, TrialState, trial_state
from pai.domain.states import JobState

SEARCHER, USER = StoppedBy.SEARCHER, StoppedBy.USER


@dataclass(frozen=True)
class Case:
    name: str
    job: JobState | None
    asked: StoppedBy | None
    want: tuple[TrialState, StoppedBy | None]


CASES = [
    Case("a waiting job: a waiting trial", JobState.WAITING, None, (TrialState.WAITING, None)),
    Case("a running job: a running trial", JobState.RUNNING, None, (TrialState.RUNNING, None)),
    Case("a job being stopped still runs", JobState.STOPPING, SEARCHER, (TrialState.RUNNING, None)),
    Case("a succeeded job: a completed trial", JobState.SUCCEEDED, None, (TrialState.COMPLETED, None)),
    Case("a failed job: a failed trial", JobState.FAILED, None, (TrialState.FAILED, None)),
    Case("a job stopped unasked was stopped by its user", JobState.STOPPED, None, (TrialState.STOPPED, USER)),
    Case("the searcher's stop", JobState.STOPPED, SEARCHER, (TrialState.STOPPED, SEARCHER)),
    Case("the experiment's stop", JobState.STOPPED, USER, (TrialState.STOPPED, USER)),
    Case("stopped by the searcher, it exited 0 first: still STOPPED", JobState.SUCCEEDED, SEARCHER,
         (TrialState.STOPPED, SEARCHER)),
    Case("stopped by the searcher, it failed first: never FAILED", JobState.FAILED, SEARCHER,
         (TrialState.STOPPED, SEARCHER)),
    Case("the user stopped it, it succeeded first: COMPLETED", JobState.SUCCEEDED, USER, (TrialState.COMPLETED, None)),
    Case("its job deleted: stopped by the user", None, None, (TrialState.STOPPED, USER)),
    Case("its job deleted after the searcher's stop", None, SEARCHER, (TrialState.STOPPED, SEARCHER)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_trial_follows_its_job(case: Case) -> None:
    assert trial_state(case.job, case.asked) == case.want


def test_every_job_state_has_a_trial_state() -> None:
    for state in JobState:
        trial, _ = trial_state(state, None)
        assert trial.is_terminal() == state.is_terminal(), state


def test_only_completed_and_stopped_experiments_have_ended() -> None:
    assert {s for s in ExperimentState if s.is_terminal()} == {ExperimentState.COMPLETED, ExperimentState.STOPPED}
