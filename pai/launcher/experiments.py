"""Experiments on the job machinery (issue 29): the thin shell around the searcher's pure core.

A user's experiment is stored as posted (``create``); the launcher loop of the leader then runs, every tick:

1. ``follow_jobs`` (writer): every trial not ended takes its job's state (``pai.domain.experiment.trial_state``):
   a trial *is* its job, scheduled like any other (gangs, priorities, preemption, retries).
2. ``pending`` (a reader): the experiments whose trials changed since the searcher last looked (``Progress``: their
   states, and how many values they reported or, for successive halving on steps, how many rungs they reached: a
   report between two rungs changes nothing of its decision), each with its records as the domain's ``Trial``\\ s.
3. ``pai.launcher.searcher.decide`` (in its own process, ``pai.launcher.decider``: Optuna's work never holds the
   writer, nor the master's GIL).
4. ``apply`` (writer): if the experiment's progress is still what was decided on, the new trials (a row, a token,
   a job of the user's named ``<experiment>-trial-<n>``), the trials the searcher stops (asked to stop at their next
   report, and their jobs stopped: SIGTERM and the grace period; a STOPPED job is never retried), and the end. A
   decision is applied in ``slices`` of at most ``APPLY_SLICE`` stops and new trials, a transaction each, each only
   if the experiment is where the previous one left it: the writer is free between them (trials' reports wait for
   it; ASHA's stops of 80 trials and their 80 replacements held it 300 ms in one transaction). The rest of a
   decision whose experiment moved meanwhile is dropped: the next tick decides again from the records.

Nothing of the search lives in memory but which progress was last decided on: a master that restarts (or another
that takes over) decides again from the records, and ``decide`` gives the same answer for the same records.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import yaml
from sqlalchemy.orm import Session

from pai.domain.errors import ConflictExperimentError, PaiError
from pai.domain.experiment import Experiment, ExperimentState, Report, StoppedBy, Trial, TrialState, trial_state
from pai.domain.states import JobState
from pai.jobspec.experiment import ParsedExperiment, experiment_from_config, trial_spec
from pai.launcher.access import require_owner_or_admin
from pai.store import credentials, trial_reports
from pai.store import experiments as store
from pai.store.db import Database
from pai.store.records import User

if TYPE_CHECKING:  # the searcher (Optuna) is imported where it decides, not by every master that starts
    from pai.launcher.searcher import NewTrial, SearchDecision

log = logging.getLogger(__name__)
_UNENDED_EXPERIMENTS = (ExperimentState.ACTIVE.value, ExperimentState.STOPPING.value)
STOP_SLICE = 16  # a decision's stops applied in one writer transaction at most (read and written together)
NEW_TRIAL_SLICE = 1  # its new trials applied in one writer transaction at most (a job submitted each)
_DUMPER: type[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # LibYAML's, where PyYAML was built with it


def slices(decision: SearchDecision) -> list[SearchDecision]:
    """The decision in parts, in order: its stops, ``STOP_SLICE`` a part at most, then its new trials,
    ``NEW_TRIAL_SLICE`` a part at most; only the last may say the search is complete. A decision of nothing is one
    part (``apply`` still sees whether it ended)."""
    stops, news = decision.stop, decision.new_trials
    parts = [replace(decision, stop=stops[i:i + STOP_SLICE], new_trials=(), complete=False)
             for i in range(0, len(stops), STOP_SLICE)]
    parts += [replace(decision, stop=(), new_trials=news[i:i + NEW_TRIAL_SLICE], complete=False)
              for i in range(0, len(news), NEW_TRIAL_SLICE)]
    return [*parts[:-1], replace(parts[-1], complete=decision.complete)] if parts else [decision]


@dataclass(frozen=True, slots=True)
class Applied:
    """What ``apply`` did: whether a job was submitted (a pass should follow), and where the experiment is now for
    the decision's next slice (None: apply no more of it)."""

    submitted: bool
    progress: store.Progress | None


@dataclass(frozen=True, slots=True)
class Work:
    """An experiment for the searcher to look at: its row, its model and its trials, at ``progress``."""

    row: store.Experiment
    experiment: Experiment
    trials: tuple[Trial, ...]
    progress: store.Progress


class ExperimentRunner:
    """The launcher's part in experiments. ``submit(s, owner, spec, text)`` stores a trial's job (``Launcher.submit``);
    ``stop_jobs(ids, by)`` stops jobs together (``Launcher.stop_for``); ``owner(s, name)`` is the user ``name`` as the
    database has it now, or None (``Accounts.user``: cached by the accounts' generation)."""

    def __init__(self, db: Database, submit: Callable[[User, Any, str], Any],
                 stop_jobs: Callable[[Sequence[str], str], Any], owner: Callable[[Session, str], User | None],
                 clock: Callable[[], float] = time.time) -> None:
        self.db, self._submit, self._stop_jobs, self._owner, self.clock = db, submit, stop_jobs, owner, clock
        self._decided: dict[int, tuple[store.Progress, bool]] = {}  # id -> the progress (and stop) last decided on

    # ---- users' requests (in the request's unit) ------------------------------------------------

    def create(self, s: Session, owner: User, parsed: ParsedExperiment, vc: str) -> store.Experiment:
        """Store ``owner``'s experiment (ACTIVE; its first trials come with the loop's next tick)."""
        row = store.create_experiment(s, owner.name, parsed.experiment.name, vc, parsed.config,
                                      state=ExperimentState.ACTIVE.value, now=self.clock())
        log.info("experiment created experiment=%s vc=%s searcher=%s", row.key, vc, parsed.experiment.searcher.name)
        return row

    def stop(self, s: Session, key: str, by: User) -> store.Experiment:
        """The user stops the search: no new trial; its trials are stopped by the loop. An ended one stays as it is."""
        row = store.get_experiment(s, key)
        require_owner_or_admin(by, row.user, "stop")
        if ExperimentState(row.state).is_terminal() or row.stop_requested:
            return row
        store.request_experiment_stop(s, row.id)
        store.set_experiment_state(s, row.id, ExperimentState.STOPPING.value)
        log.info("experiment stop requested experiment=%s by=%s", key, by.name)
        return replace(row, state=ExperimentState.STOPPING.value, stop_requested=True)

    # ---- the loop's work ------------------------------------------------------------------------

    def follow_jobs(self) -> int:
        """Writer: every trial not ended takes its job's state; how many changed."""
        changes: list[tuple[int, str, str | None]] = []
        with self.db.session() as s:
            for trial in store.unended_trials(s):
                asked = StoppedBy(trial.stopped_by) if trial.stopped_by else None
                job = JobState(trial.job_state) if trial.job_state is not None else None  # None: deleted
                state, stopped_by = trial_state(job, asked)
                # who asked a trial to stop is kept while its job stops (the domain says None until it has)
                by = stopped_by.value if stopped_by else trial.stopped_by
                if state.value != trial.state or by != trial.stopped_by:
                    changes.append((trial.id, state.value, by))
                    log.info("trial state experiment=%s trial=%d job=%s %s->%s", trial.experiment_id, trial.number,
                             trial.job_key, trial.state, state.value)
            store.set_trial_states(s, changes)  # one statement for all (a rung's stops end dozens in a tick)
        return len(changes)

    def pending(self) -> list[Work]:
        """A reader: the experiments not ended whose progress changed since the searcher last looked."""
        works: list[Work] = []
        with self.db.session() as s:
            for row in store.list_experiments(s, states=_UNENDED_EXPERIMENTS):
                experiment = experiment_from_config(row.spec)
                progress = _progress(s, row.id, experiment)
                if self._decided.get(row.id) == (progress, row.stop_requested):
                    continue
                works.append(Work(row, experiment, _trials(s, row.id, experiment), progress))
        return works

    def apply(self, work: Work, decision: SearchDecision, priority_classes: dict[str, int]) -> Applied:
        """Writer, in one unit: the decision (or a slice of it) on ``work``, if the experiment is where it was."""
        with self.db.unit() as s:
            row = store.get_experiment_by_id(s, work.row.id)
            if store.unended_states(s, row.id) != work.progress.states or ExperimentState(row.state).is_terminal():
                return Applied(False, None)  # a trial moved on meanwhile: the next tick decides again (new reports
                # alone do not void a decision: it was right on the records it saw, and the next one sees them)
            owner = self._owner(s, row.user)  # with their groups now: the VCs a new trial's job may use
            submitted, going_on = False, True
            if row.stop_requested or owner is None:
                self._stop_trials(s, row, [t.number for t in work.trials
                                           if t.state.is_active() and not t.stop_requested], StoppedBy.USER)
                going_on = False  # stopped whole: nothing of the decision applies
            else:
                self._stop_trials(s, row, decision.stop, StoppedBy.SEARCHER)
                for new in decision.new_trials:
                    submitted |= self._new_trial(s, row, owner, new, work.experiment, priority_classes)
            # read once: what ends the experiment, and where the next slice starts
            after = _progress(s, row.id, work.experiment)
            if self._end_if_done(s, row, decision, work.progress, after):
                self._decided.pop(row.id, None)
                going_on = False
            else:
                self._decided[row.id] = (work.progress, work.row.stop_requested)
            return Applied(submitted, after if going_on else None)

    def _new_trial(self, s: Session, row: store.Experiment, owner: User, new: NewTrial, experiment: Experiment,
                   priority_classes: dict[str, int]) -> bool:
        token = credentials.new_token()
        try:
            trial = store.add_trial(s, row.id, new.number, new.hparams, credentials.token_digest(token),
                                    state=TrialState.WAITING.value, now=self.clock())
        except ConflictExperimentError:
            return False  # asked already (a decision applied twice)
        try:  # the submission undoes its own writes if it fails (its session is a SAVEPOINT of this unit)
            doc, spec = trial_spec(row.name, experiment.trial, new.number, new.hparams, priority_classes)
            envs = {**spec.job_envs, "PAI_TRIAL_ID": str(trial.id),
                    "PAI_TRIAL_HPARAMS": json.dumps(new.hparams, sort_keys=True)}
            spec = replace(spec, job_envs=envs, trial_token=token)
            job = self._submit(owner, spec, yaml.dump(doc, Dumper=_DUMPER, sort_keys=False))
        except PaiError as e:  # the VC closed, the user lost it, a name taken: the trial fails, the search goes on
            store.set_trial_state(s, trial.id, TrialState.FAILED.value)
            log.warning("trial not submitted experiment=%s trial=%d error=%s", row.key, new.number, e.message)
            return False
        store.set_trial_job(s, trial.id, job.id)
        log.info("trial submitted experiment=%s trial=%d job=%s hparams=%s", row.key, new.number, job.key,
                 json.dumps(new.hparams, sort_keys=True))
        return True

    def _stop_trials(self, s: Session, row: store.Experiment, numbers: Sequence[int], by: StoppedBy) -> None:
        """Ask the trials ``numbers`` to stop, and stop their jobs, all in a few statements (a rung stops dozens). A
        trial that ended meanwhile (its job did, before the trials followed it) is left as it is: what it did stands."""
        found = [t for t in store.trials_to_stop(s, row.id, numbers) if t.state in store.UNENDED and not t.job_ended]
        if not found:
            return
        store.request_trial_stops(s, [t.id for t in found], by.value)
        self._stop_jobs([t.job_id for t in found if t.job_id is not None], f"the {by.value} of experiment {row.key}")
        for t in found:
            log.info("trial stop requested experiment=%s trial=%d job=%s by=%s", row.key, t.number, t.job_key,
                     by.value)

    def _end_if_done(self, s: Session, row: store.Experiment, decision: SearchDecision, before: store.Progress,
                     after: store.Progress) -> bool:
        active = any(state in store.UNENDED for _, state, _ in after.states)
        if active:
            return False
        if row.stop_requested:
            state = ExperimentState.STOPPED
        elif decision.complete and before.trials == after.trials:
            state = ExperimentState.COMPLETED
        else:
            return False
        store.set_experiment_state(s, row.id, state.value, ended_at=self.clock())
        log.info("experiment ended experiment=%s state=%s trials=%d", row.key, state.value, before.trials)
        return True


def _progress(s: Session, experiment_id: int, experiment: Experiment) -> store.Progress:
    """Where the experiment is, as far as its searcher's decision goes: its trials' states, and what of their reports
    it judges (successive halving on steps: the rungs reached; another that stops early: every value; one that does
    not: none, only ended trials count)."""
    searcher = experiment.searcher
    if searcher.rungs and searcher.time_metric == "step":
        return store.progress(s, experiment_id, searcher.rungs)
    progress = store.progress(s, experiment_id)
    return progress if searcher.name.stops_early else replace(progress, points=0)


def _trials(s: Session, experiment_id: int, experiment: Experiment) -> tuple[Trial, ...]:
    """The experiment's trials as the searcher sees them: state, and every report of its metric (and time axis)."""
    searcher = experiment.searcher
    if searcher.rungs and searcher.time_metric == "step":  # successive halving judges trials at its rungs only
        curves = trial_reports.reports_at(s, experiment_id, searcher.metric, searcher.rungs)
    else:
        curves = trial_reports.reports_of(s, experiment_id, {searcher.metric} | ({searcher.time_metric} - {"step"}))
    return tuple(
        Trial(number=t.number, hparams=t.hparams, state=TrialState(t.state),
              reports=tuple(Report(step, got.values, seq=round(got.at * 1e6))
                            for step, got in sorted(curves.get(t.id, {}).items())),
              stopped_by=StoppedBy(t.stopped_by) if t.stopped_by else None, stop_requested=t.stop_requested)
        for t in store.trials_of(s, experiment_id))
