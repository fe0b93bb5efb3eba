"""Experiments and their trials (``ExperimentRow``, ``TrialRow``): a hyperparameter search, as posted, and one row
per trial the searcher asked for, with its hyperparameters, its job and its state.

States are plain strings here (the domain's experiment and trial states name them). A trial reports with a token of
its own: the caller makes it (``credentials.new_token()``) and hands it to the trial's tasks; only its sha256
(``credentials.token_digest``) is stored, and :func:`trial_by_token` finds the trial from it. A trial's job goes with
its experiment (:func:`delete_experiment`); a job deleted alone leaves its trial, without a job (``job_id`` None).
Metrics and checkpoints: ``pai.store.trial_reports``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, bindparam, case, delete, func, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql import Select

from pai.domain.errors import ConflictExperimentError, NoExperimentError, NoTrialError
from pai.domain.states import JobState
from pai.store import jobs
from pai.store.dialects import insert_new
from pai.store.schema import ExperimentRow, JobRow, TrialRow

UNENDED = ("WAITING", "RUNNING")  # the trial states that follow their job (pai.domain.experiment.TrialState)


@dataclass(frozen=True, slots=True)
class Experiment:
    id: int
    user: str
    name: str
    vc: str
    spec: dict[str, Any]
    state: str
    created_at: float
    ended_at: float | None
    stop_requested: bool

    @property
    def key(self) -> str:
        return f"{self.user}~{self.name}"


@dataclass(frozen=True, slots=True)
class Trial:
    id: int
    experiment_id: int
    number: int
    hparams: dict[str, Any]
    job_id: str | None
    state: str
    stopped_by: str | None
    stop_requested: bool
    points: int  # metric rows stored (pai.store.trial_reports.MAX_POINTS_PER_TRIAL at most)
    created_at: float


def _experiment(row: ExperimentRow) -> Experiment:
    return Experiment(row.id, row.user_name, row.name, row.vc, row.spec, row.state, row.created_at, row.ended_at,
                      row.stop_requested)


def _trial(row: TrialRow) -> Trial:
    return Trial(row.id, row.experiment_id, row.number, row.hparams, row.job_id, row.state, row.stopped_by,
                 row.stop_requested, row.points, row.created_at)


def create_experiment(s: Session, user: str, name: str, vc: str, spec: dict[str, Any], *, state: str,
                      now: float | None = None) -> Experiment:
    """Store a new experiment; ConflictExperimentError when ``user~name`` exists (nothing stored)."""
    at = time.time() if now is None else now
    try:
        with s.begin_nested():
            new_id = s.execute(insert(ExperimentRow).values(
                user_name=user, name=name, vc=vc, spec=spec, state=state, created_at=at,
            ).returning(ExperimentRow.id)).scalar_one()
    except IntegrityError as e:
        raise ConflictExperimentError(f"experiment {user}~{name} already exists") from e
    return Experiment(new_id, user, name, vc, spec, state, at, None, False)


def get_experiment(s: Session, key: str) -> Experiment:
    """The experiment ``user~name``; NoExperimentError when there is none."""
    user, _, name = key.partition("~")
    row = s.scalars(select(ExperimentRow).where(ExperimentRow.user_name == user, ExperimentRow.name == name)).first()
    if row is None:
        raise NoExperimentError(f"experiment {key} not found")
    return _experiment(row)


def experiment_exists(s: Session, key: str) -> bool:
    """Whether ``user~name`` is an experiment (in any state)."""
    user, _, name = key.partition("~")
    return s.scalar(select(ExperimentRow.id).where(ExperimentRow.user_name == user, ExperimentRow.name == name)) \
        is not None


_EXPERIMENT_COLUMNS = (ExperimentRow.id, ExperimentRow.user_name, ExperimentRow.name, ExperimentRow.vc,
                       ExperimentRow.spec, ExperimentRow.state, ExperimentRow.created_at, ExperimentRow.ended_at,
                       ExperimentRow.stop_requested)  # Experiment's fields, in its order
_BY_ID = select(*_EXPERIMENT_COLUMNS).where(ExperimentRow.id == bindparam("id"))  # columns: no ORM load (a slice
# of a decision reads its experiment first)


def get_experiment_by_id(s: Session, experiment_id: int) -> Experiment:
    row = s.execute(_BY_ID, {"id": experiment_id}).first()
    if row is None:
        raise NoExperimentError(f"experiment {experiment_id} not found")
    return Experiment(*row)


def list_experiments(s: Session, user: str | None = None, *, states: tuple[str, ...] = ()) -> list[Experiment]:
    """The experiments of ``user`` (None: everyone's), in ``states`` when given, oldest first."""
    query = select(ExperimentRow).order_by(ExperimentRow.created_at, ExperimentRow.id)
    if user is not None:
        query = query.where(ExperimentRow.user_name == user)
    if states:
        query = query.where(ExperimentRow.state.in_(states))
    return [_experiment(row) for row in s.scalars(query)]


def set_experiment_state(s: Session, experiment_id: int, state: str, *, ended_at: float | None = None) -> None:
    _updated(s.execute(update(ExperimentRow).where(ExperimentRow.id == experiment_id)
                       .values(state=state, ended_at=ended_at)), NoExperimentError, experiment_id)


def request_experiment_stop(s: Session, experiment_id: int) -> None:
    """The user stopped the search: the launcher stops its trials (``request_trial_stop``) and asks for no more."""
    _updated(s.execute(update(ExperimentRow).where(ExperimentRow.id == experiment_id).values(stop_requested=True)),
             NoExperimentError, experiment_id)


def delete_experiment(s: Session, experiment_id: int) -> list[str]:
    """Delete the experiment with its trials, their metrics and checkpoints, and their jobs (``jobs.delete_job``);
    the deleted jobs' ids. The caller makes sure none of them runs. NoExperimentError when there is none."""
    get_experiment_by_id(s, experiment_id)
    job_ids = [j for j in s.scalars(select(TrialRow.job_id).where(TrialRow.experiment_id == experiment_id)) if j]
    for job_id in job_ids:
        jobs.delete_job(s, job_id)
    s.execute(delete(ExperimentRow).where(ExperimentRow.id == experiment_id))
    return job_ids


# Core statements on the table, built once: the ORM's UPDATE of an entity costs several times the statement, and a
# decision's slices run them on the writer thread
_TRIALS = cast(Table, TrialRow.__table__)
_INSERT_TRIAL = insert_new(_TRIALS, _TRIALS.c.id)


def add_trial(s: Session, experiment_id: int, number: int, hparams: dict[str, Any], token_hash: str, *,
              state: str, job_id: str | None = None, now: float | None = None) -> Trial:
    """A new trial ``number`` of the experiment. ``token_hash``: the digest of its token (never the token).
    ConflictExperimentError when the experiment has a trial ``number`` already (nothing inserted, the transaction as
    it was: ON CONFLICT DO NOTHING, no SAVEPOINT around it on a searcher's every new trial)."""
    at = time.time() if now is None else now
    new_id = s.execute(_INSERT_TRIAL[s.get_bind().dialect.name], {
        "experiment_id": experiment_id, "number": number, "hparams": hparams, "job_id": job_id, "state": state,
        "token_hash": token_hash, "created_at": at}).scalar()
    if new_id is None:
        raise ConflictExperimentError(f"experiment {experiment_id} has a trial {number} already")
    return Trial(new_id, experiment_id, number, hparams, job_id, state, None, False, 0, at)


def get_trial(s: Session, trial_id: int) -> Trial:
    row = s.get(TrialRow, trial_id)
    if row is None:
        raise NoTrialError(f"trial {trial_id} not found")
    return _trial(row)


_BY_TOKEN = select(*(getattr(TrialRow, name) for name in (
    "id", "experiment_id", "number", "hparams", "job_id", "state", "stopped_by", "stop_requested", "points",
    "created_at"))).where(TrialRow.token_hash == bindparam("digest"))  # a report's check: built once, no ORM load


def trial_by_token(s: Session, token_hash: str) -> Trial | None:
    """The trial whose token has this digest; None when no trial's has."""
    row = s.execute(_BY_TOKEN, {"digest": token_hash}).first()
    return None if row is None else Trial(*row)


def trial_of_job(s: Session, job_id: str) -> Trial | None:
    row = s.scalars(select(TrialRow).where(TrialRow.job_id == job_id)).first()
    return None if row is None else _trial(row)


def trials_of(s: Session, experiment_id: int) -> list[Trial]:
    """The experiment's trials by number."""
    query = select(TrialRow).where(TrialRow.experiment_id == experiment_id).order_by(TrialRow.number)
    return [_trial(row) for row in s.scalars(query)]


_BY_TRIAL = _TRIALS.c.id == bindparam("trial")
_SET_JOB = update(_TRIALS).where(_BY_TRIAL).values(job_id=bindparam("job"))
_SET_STATE = update(_TRIALS).where(_BY_TRIAL).values(state=bindparam("new_state"), stopped_by=bindparam("by"))
_REQUEST_STOP = update(_TRIALS).where(_BY_TRIAL).values(
    stop_requested=True, stopped_by=func.coalesce(_TRIALS.c.stopped_by, bindparam("by")))


def set_trial_job(s: Session, trial_id: int, job_id: str) -> None:
    _updated(s.execute(_SET_JOB, {"trial": trial_id, "job": job_id}), NoTrialError, trial_id)


def set_trial_state(s: Session, trial_id: int, state: str, *, stopped_by: str | None = None) -> None:
    """The trial's state, and who stopped it (``searcher``, a user) when it was stopped."""
    _updated(s.execute(_SET_STATE, {"trial": trial_id, "new_state": state, "by": stopped_by}), NoTrialError,
             trial_id)


def request_trial_stop(s: Session, trial_id: int, by: str | None = None) -> None:
    """The searcher (or a stopped experiment) wants the trial to end: its next report answers ``stop``. ``by``
    (``searcher``, ``user``): who asked, kept as who stopped it once it has (a second request keeps the first's)."""
    _updated(s.execute(_REQUEST_STOP, {"trial": trial_id, "by": by}), NoTrialError, trial_id)


def request_trial_stops(s: Session, trial_ids: Sequence[int], by: str) -> None:
    """``request_trial_stop`` of several trials at once (one statement run for each): the trials are the caller's,
    read in the same transaction."""
    if trial_ids:
        s.execute(_REQUEST_STOP, [{"trial": i, "by": by} for i in trial_ids])


@dataclass(frozen=True, slots=True)
class Progress:
    """What an experiment's search decides on, in short: when it changes, the searcher looks again."""

    trials: int
    points: int
    states: tuple[tuple[int, str, bool], ...]  # (number, state, stop_requested) of the trials not ended, by number:
    # an ended trial's never change (its job is no longer followed), so these and ``trials`` say every change


def progress(s: Session, experiment_id: int, rungs: Sequence[int] = ()) -> Progress:
    """``points``: the values its trials reported; with ``rungs`` (sorted steps of the searcher's metric), the rungs
    its trials reached instead (each trial's latest step of that metric, past how many of them): successive halving
    judges a trial at its rungs only, and a report between two changes nothing of its decision. Counted by the
    database, and only the trials not ended read: the cost follows the trials running, not all those an experiment
    of a thousand trials ran."""
    trials, points = s.execute(_counts(tuple(rungs)), {"experiment": experiment_id}).one()
    return Progress(int(trials), int(points), unended_states(s, experiment_id))


@functools.lru_cache(maxsize=64)
def _counts(rungs: tuple[int, ...]) -> Select[Any]:
    """``progress``'s count, built once for each searcher's rungs (its expression and cache key cost more than the
    query: a decision's every slice reads it)."""
    t = TrialRow
    counted = sum((case((t.latest_step >= rung, 1), else_=0) for rung in rungs), start=literal(0)) if rungs \
        else t.points
    return select(func.count(), func.coalesce(func.sum(counted), 0)).where(t.experiment_id == bindparam("experiment"))


_UNENDED_STATES = (select(TrialRow.number, TrialRow.state, TrialRow.stop_requested)
                   .where(TrialRow.experiment_id == bindparam("experiment"), TrialRow.state.in_(UNENDED))
                   .order_by(TrialRow.number))


def unended_states(s: Session, experiment_id: int) -> tuple[tuple[int, str, bool], ...]:
    """The experiment's trials not ended: (number, state, stop_requested), by number (``Progress.states``)."""
    rows = s.execute(_UNENDED_STATES, {"experiment": experiment_id})
    return tuple((int(number), str(state), bool(asked)) for number, state, asked in rows)


@dataclass(frozen=True, slots=True)
class TrialJob:
    """A trial that has not ended (what following its job needs of it), with its job's state now and key (None: its
    job is gone)."""

    id: int
    experiment_id: int
    number: int
    state: str
    stopped_by: str | None
    job_state: str | None
    job_key: str | None


# columns, not entities, built once: the loop reads every trial not ended on each tick, in the writer
_UNENDED_TRIALS = (select(TrialRow.id, TrialRow.experiment_id, TrialRow.number, TrialRow.state, TrialRow.stopped_by,
                          JobRow.state.label("job_state"), JobRow.user_name, JobRow.name)
                   .outerjoin(JobRow, JobRow.id == TrialRow.job_id)
                   .where(TrialRow.state.in_(UNENDED)).order_by(TrialRow.id))


def unended_trials(s: Session) -> list[TrialJob]:
    """Every trial not ended yet (of any experiment), with its job's state: what follows the jobs."""
    return [TrialJob(r.id, r.experiment_id, r.number, r.state, r.stopped_by, r.job_state,
                     None if r.user_name is None else f"{r.user_name}~{r.name}")
            for r in s.execute(_UNENDED_TRIALS)]


def set_trial_states(s: Session, changes: Sequence[tuple[int, str, str | None]]) -> None:
    """Several trials' states at once, one statement run for each (``set_trial_state`` each): (trial id, state, who
    stopped it). The trials are the caller's, read in the same transaction."""
    if changes:
        s.execute(_SET_STATE, [{"trial": i, "new_state": state, "by": by} for i, state, by in changes])


@dataclass(frozen=True, slots=True)
class TrialToStop:
    """What stopping a trial needs to know of it: its state, whether its job has ended (or is gone, or it has none),
    and the job's id and key (None: it has no job any more)."""

    id: int
    number: int
    state: str
    job_ended: bool
    job_id: str | None
    job_key: str | None


# built once (its cache key too): ASHA's rung stops dozens of trials at once
_TO_STOP = (select(TrialRow.id, TrialRow.number, TrialRow.state, JobRow.id.label("job_id"),
                   JobRow.state.label("job_state"), JobRow.user_name, JobRow.name)
            .outerjoin(JobRow, JobRow.id == TrialRow.job_id)
            .where(TrialRow.experiment_id == bindparam("experiment"),
                   TrialRow.number.in_(bindparam("numbers", expanding=True)))
            .order_by(TrialRow.number))


def trials_to_stop(s: Session, experiment_id: int, numbers: Collection[int]) -> list[TrialToStop]:
    """The experiment's trials of ``numbers`` (those that exist), by number, each with its job's state, id and key:
    one query for all."""
    if not numbers:
        return []
    rows = s.execute(_TO_STOP, {"experiment": experiment_id, "numbers": sorted(numbers)})
    return [TrialToStop(int(r.id), int(r.number), str(r.state),
                        r.job_state is None or JobState(r.job_state).is_terminal(), r.job_id,
                        None if r.user_name is None else f"{r.user_name}~{r.name}") for r in rows]


def job_keys(s: Session, experiment_id: int) -> dict[int, str]:
    """The experiment's trials' jobs: trial id -> ``user~job``."""
    query = (select(TrialRow.id, JobRow.user_name, JobRow.name).join(JobRow, JobRow.id == TrialRow.job_id)
             .where(TrialRow.experiment_id == experiment_id))
    return {int(r.id): f"{r.user_name}~{r.name}" for r in s.execute(query)}


def _updated(result: Any, error: type[NoExperimentError | NoTrialError], what: int) -> None:
    if not getattr(result, "rowcount", 0):
        raise error(f"{'experiment' if error is NoExperimentError else 'trial'} {what} not found")
