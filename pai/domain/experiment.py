"""Experiments: a hyperparameter search over trials, each trial a job of the user's (issue 29).

The pure model: the hyperparameter spaces, the searcher's configuration, the trials' states and what they
reported. :mod:`pai.jobspec.experiment` builds it from a document; :mod:`pai.launcher.searcher` decides on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pai.domain.states import JobState

Scalar = str | int | float | bool | None  # a categorical or constant value (JSON scalars)

ASHA_RUNGS = 3  # rungs of ASHA below maxTime: at maxTime / divisor**2, maxTime / divisor (and maxTime ends a trial)
MAX_GRID_POINTS = 10_000  # the most points a grid search may enumerate


@dataclass(frozen=True, slots=True)
class ConstSpace:
    val: Scalar


@dataclass(frozen=True, slots=True)
class IntSpace:
    minval: int
    maxval: int
    count: int | None = None  # grid: this many evenly spaced values (default: every integer)


@dataclass(frozen=True, slots=True)
class DoubleSpace:
    minval: float
    maxval: float
    count: int | None = None  # grid: this many evenly spaced values (required in a grid search)


@dataclass(frozen=True, slots=True)
class LogSpace:
    """Values (not exponents) between ``minval`` > 0 and ``maxval``, uniform in their logarithm."""

    minval: float
    maxval: float
    count: int | None = None  # grid: this many geometrically spaced values (required in a grid search)


@dataclass(frozen=True, slots=True)
class CategoricalSpace:
    vals: tuple[Scalar, ...]


Space = ConstSpace | IntSpace | DoubleSpace | LogSpace | CategoricalSpace


class SearcherName(StrEnum):
    RANDOM = "random"
    GRID = "grid"
    TPE = "tpe"  # Optuna's Tree-structured Parzen Estimator over the finished trials
    ASHA = "asha"  # random trials, the worst stopped at each rung (Optuna's successive-halving pruner)
    HYPERBAND = "hyperband"  # random trials, successive halving in brackets of several rates (Optuna's Hyperband)

    @property
    def stops_early(self) -> bool:
        """Judges running trials on their curves (needs ``maxTime``)."""
        return self in (SearcherName.ASHA, SearcherName.HYPERBAND)


@dataclass(frozen=True, slots=True)
class Searcher:
    name: SearcherName
    metric: str
    max_trials: int
    smaller_is_better: bool = True
    max_concurrent_trials: int = 1
    time_metric: str = "step"  # the axis of a trial's curve: its reports' step, or a metric it reports
    max_time: int | None = None  # asha, hyperband: a trial's length on that axis (required)
    divisor: int = 4  # asha, hyperband: the reduction factor between rungs

    @property
    def min_resource(self) -> int:
        """ASHA's first rung on the time axis; the next ones are ``divisor`` times further each."""
        assert self.max_time is not None
        return max(1, self.max_time // int(self.divisor ** (ASHA_RUNGS - 1)))

    @property
    def rungs(self) -> tuple[int, ...]:
        """Where on the time axis successive halving judges a trial (ASHA's rungs, and every Hyperband bracket's):
        ``min_resource`` times a power of ``divisor``, below ``max_time`` (a trial that reaches it has ended: it is
        not judged). A report below the next rung of its trial changes nothing: the searcher needs only each trial's
        first report at or past each rung."""
        if not self.name.stops_early or self.max_time is None:
            return ()
        rungs, at = [], self.min_resource
        while at < self.max_time:
            rungs.append(at)
            at *= self.divisor
        return tuple(rungs)


class TrialState(StrEnum):
    WAITING = "WAITING"  # created; its job is not running yet
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"  # its job succeeded
    STOPPED = "STOPPED"  # stopped by the searcher or the user (see StoppedBy)
    FAILED = "FAILED"

    def is_terminal(self) -> bool:
        return self in _TERMINAL

    def is_active(self) -> bool:
        """Counts against ``maxConcurrentTrials``: not ended yet (a trial being stopped still runs)."""
        return not self.is_terminal()


_TERMINAL = frozenset({TrialState.COMPLETED, TrialState.STOPPED, TrialState.FAILED})


class StoppedBy(StrEnum):
    SEARCHER = "searcher"  # early stopping: never FAILED, never retried
    USER = "user"  # the experiment (or the trial's job) was stopped


# A trial follows its job: the job's state -> the trial's (a STOPPED job's trial says who stopped it).
TRIAL_OF_JOB: Mapping[JobState, TrialState] = {
    JobState.WAITING: TrialState.WAITING,
    JobState.RUNNING: TrialState.RUNNING,
    JobState.STOPPING: TrialState.RUNNING,
    JobState.SUCCEEDED: TrialState.COMPLETED,
    JobState.STOPPED: TrialState.STOPPED,
    JobState.FAILED: TrialState.FAILED,
}


def trial_state(job: JobState | None, stop_asked_by: StoppedBy | None) -> tuple[TrialState, StoppedBy | None]:
    """A trial's state and who stopped it, from its job's state (None: the job was deleted, which stops the trial)
    and who asked it to stop (None: nobody; a job stopped without being asked was stopped by its user). A trial the
    searcher stopped is STOPPED however its job ended: it may have seen ``stop`` in a report's answer and exited by
    itself (0, or an error) before its task was stopped; it is never FAILED, nor COMPLETED, and not retried."""
    if stop_asked_by is StoppedBy.SEARCHER and (job is None or job.is_terminal()):
        return TrialState.STOPPED, StoppedBy.SEARCHER
    state = TrialState.STOPPED if job is None else TRIAL_OF_JOB[job]
    if state is not TrialState.STOPPED:
        return state, None
    return state, stop_asked_by or StoppedBy.USER


class ExperimentState(StrEnum):
    ACTIVE = "ACTIVE"  # searching: trials are asked for as others end
    STOPPING = "STOPPING"  # the user stopped it: no new trial, its trials are being stopped
    COMPLETED = "COMPLETED"  # the searcher ran every trial it meant to
    STOPPED = "STOPPED"  # stopped by the user, every trial ended

    def is_terminal(self) -> bool:
        return self in (ExperimentState.COMPLETED, ExperimentState.STOPPED)


@dataclass(frozen=True, slots=True)
class Report:
    """One report of a trial: its metrics at ``step``. ``seq`` orders reports across trials as they arrived
    (the store's insertion order), so that a rebuilt search replays them as they came."""

    step: int
    values: Mapping[str, float]
    seq: int = 0


@dataclass(frozen=True, slots=True)
class Trial:
    number: int  # 0, 1, ... within its experiment
    hparams: Mapping[str, Any]
    state: TrialState = TrialState.WAITING
    reports: tuple[Report, ...] = ()
    stopped_by: StoppedBy | None = None
    stop_requested: bool = False

    def last_value(self, metric: str) -> float | None:
        """The value of ``metric`` at the latest step that reported it."""
        steps = [r for r in self.reports if metric in r.values]
        return max(steps, key=lambda r: r.step).values[metric] if steps else None


@dataclass(frozen=True, slots=True)
class Experiment:
    name: str
    searcher: Searcher
    hyperparameters: Mapping[str, Space]
    trial: Mapping[str, Any] = field(default_factory=dict)  # the body of a v2 job, as submitted


def grid_values(space: Space) -> tuple[Any, ...]:
    """The values a grid search takes of one hyperparameter, in order."""
    match space:
        case ConstSpace(val):
            return (val,)
        case CategoricalSpace(vals):
            return vals
        case IntSpace(low, high, count):
            if count is None:
                return tuple(range(low, high + 1))
            return tuple(sorted({round(low + (high - low) * i / max(count - 1, 1)) for i in range(count)}))
        case LogSpace(low, high, count):
            n = count or 1
            return tuple(sorted({min(high, low * (high / low) ** (i / max(n - 1, 1))) for i in range(n)}))
        case DoubleSpace(low, high, count):
            n = count or 1
            return tuple(sorted({low + (high - low) * i / max(n - 1, 1) for i in range(n)}))
    raise AssertionError(space)
