"""What trials report: metric values (``TrialMetricRow``) and checkpoints (``TrialCheckpointRow``).

A report is idempotent per (trial, step, name): the first value stays, a later one for the same key is ignored
(``INSERT ... ON CONFLICT DO NOTHING``). A trial retried or preempted resumes from its latest checkpoint and reports
its steps again: its curve continues instead of restarting, and the values the searcher already decided on do not
change under it (its decisions, rebuilt from these rows after a master restart, stay the same).

Storage is bounded: a trial keeps at most ``MAX_POINTS_PER_TRIAL`` values (one per step and name). A report that
would store more is refused whole (InvalidParametersError, 400, nothing of it stored); values already stored are
answered as before (a repeat adds nothing). The count is ``TrialRow.points``, moved in the report's transaction, so
a report never counts rows. Values must be finite numbers: NaN, infinities and non-numbers are refused here (400),
whatever the client checked.

Concurrent reports (API workers on PostgreSQL) of the same trial serialise on the trial's row, which every report
takes last (after its inserts), so they never wait for each other in a cycle.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from pai.domain.errors import InvalidParametersError, NoTrialError
from pai.store import report_statements as statements
from pai.store.report_statements import INSERTS, move
from pai.store.schema import ExperimentRow, TrialCheckpointRow, TrialMetricRow, TrialRow

MAX_POINTS_PER_TRIAL = 50_000
MAX_NAME_LENGTH = 255
MAX_STEP = 2**62


@dataclass(frozen=True, slots=True)
class ReportAnswer:
    stored: int  # values this report added (0: all of them were reported before)
    stop: bool  # the trial should end (the searcher pruned it, or its experiment was stopped)


@dataclass(frozen=True, slots=True)
class MetricSummary:
    latest_step: int
    latest: float
    best_step: int  # the first step at which ``best`` was reported
    best: float


@dataclass(frozen=True, slots=True)
class Checkpoint:
    trial_id: int
    step: int
    path: str
    metadata: dict[str, Any]
    created_at: float


def _insert(s: Session) -> Any:
    return postgresql.insert if s.get_bind().dialect.name == "postgresql" else sqlite.insert


def check_step(step: object) -> int:
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        raise InvalidParametersError(f"step: must be an integer from 0 to {MAX_STEP}, not {step!r}", field="step")
    return step


def check_values(values: Mapping[str, object]) -> dict[str, float]:
    """The report's values as floats; InvalidParametersError naming the metric when one is not a finite number."""
    if not values:
        raise InvalidParametersError("metrics: must name at least one value", field="metrics")
    checked: dict[str, float] = {}
    for name, value in values.items():
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_LENGTH:
            raise InvalidParametersError(
                f"metrics: a metric's name must be 1 to {MAX_NAME_LENGTH} characters, not {name!r}", field="metrics")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidParametersError(f"metrics.{name}: must be a finite number, not {value!r}",
                                         field=f"metrics.{name}")
        checked[name] = float(value)
    return checked


_TRIALS = cast(Table, TrialRow.__table__)
_SEARCHED = select(ExperimentRow.id, ExperimentRow.spec).where(ExperimentRow.id.in_(bindparam("ids", expanding=True)))
_EXPERIMENT_OF = select(_TRIALS.c.experiment_id).where(_TRIALS.c.id == bindparam("trial"))


def _searched(s: Session, experiment_ids: Iterable[int]) -> dict[int, tuple[str | None, bool]]:
    """Each experiment's searcher metric and whether smaller is better (None: it names none)."""
    found: dict[int, tuple[str | None, bool]] = {}
    for row in s.execute(_SEARCHED, {"ids": sorted(set(experiment_ids))}):
        searcher = (row.spec or {}).get("searcher") or {}
        found[int(row.id)] = (searcher.get("metric"), bool(searcher.get("smallerIsBetter", True)))
    return found


def _summary(stored: Iterable[tuple[int, float]], smaller: bool) -> dict[str, Any]:
    """The latest and the best of the (step, value) of the metric a report (or a batch of one trial's) stored."""
    points = list(stored)
    latest = max(points)
    best = min(points, key=lambda p: ((p[1] if smaller else -p[1]), p[0]))
    return {"ls": latest[0], "lv": latest[1], "bs": best[0], "bv": best[1]}


def report(s: Session, trial_id: int, step: object, values: Mapping[str, object], *,
           now: float | None = None, known: bool = False) -> ReportAnswer:
    """Store the trial's ``values`` at ``step`` (the first value of each name at a step stays); whether it should stop.
    InvalidParametersError: a bad step or value, or the trial's storage is full; NoTrialError: no such trial.
    ``known``: the caller found the trial in this transaction (its token): it is not looked up again."""
    at_step, checked = check_step(step), check_values(values)
    at = time.time() if now is None else now
    rows = [{"trial_id": trial_id, "step": at_step, "name": name, "value": checked[name], "reported_at": at}
            for name in sorted(checked)]
    experiment = s.execute(_EXPERIMENT_OF, {"trial": trial_id}).scalar()
    if experiment is None:
        raise NoTrialError(f"trial {trial_id} not found")
    metric, smaller = _searched(s, [experiment]).get(experiment, (None, True))
    names = {r.name for r in s.execute(INSERTS[s.get_bind().dialect.name], rows)}
    params: dict[str, Any] = {"trial": trial_id, "added": len(names), "cap": MAX_POINTS_PER_TRIAL}
    summarized = metric is not None and metric in names
    if summarized:
        params |= _summary([(at_step, checked[str(metric)])], smaller)
    moved = s.execute(move(smaller if summarized else None, guarded=True), params).one_or_none()
    stored = len(names)
    if moved is None:
        raise InvalidParametersError(
            f"metrics: trial {trial_id} keeps at most {MAX_POINTS_PER_TRIAL} metric values (one per step and name) and "
            f"this report would store more; report less often (every n-th step) or fewer metrics", field="metrics")
    return ReportAnswer(stored, bool(moved.stop_requested))


@dataclass(frozen=True, slots=True)
class Incoming:
    """A report as it came, checked (``check_step``, ``check_values``): the digest of the token it carries."""

    digest: str
    trial_id: int
    step: int
    values: Mapping[str, float]
    at: float


class NotATrialToken(Exception):
    """The token is no trial's: the caller decides (a user's token, or none)."""


class OtherTrialToken(Exception):
    """The token is another trial's (its id in ``args[0]``)."""


Outcome = ReportAnswer | NotATrialToken | OtherTrialToken | InvalidParametersError


def report_many(c: Connection, items: Sequence[Incoming]) -> list[Outcome]:
    """Reports that arrived together, in one transaction: their trials found by their tokens in one query, their
    values inserted in one statement, each trial's count moved once. Each gets what ``report`` would have answered
    it, or the refusal of its token. A trial that the batch would take past ``MAX_POINTS_PER_TRIAL`` has its reports
    handled one by one (``report``, each in a SAVEPOINT: the one that does not fit is refused whole). On a connection
    in a transaction (``engine.begin()``), not a Session: a batch is often one report, and a Session's own work
    (its creation, its transaction's states) was a fifth of a batch's."""
    digests = sorted({item.digest for item in items})
    holders = {row.token_hash: row for row in statements.holders(c, digests)}
    outcomes: list[Outcome | None] = [None] * len(items)
    fast: dict[int, list[int]] = {}  # trial id -> the items of it in this batch
    for i, item in enumerate(items):
        holder = holders.get(item.digest)
        if holder is None:
            outcomes[i] = NotATrialToken()
        elif holder.id != item.trial_id:
            outcomes[i] = OtherTrialToken(holder.id)
        else:
            fast.setdefault(holder.id, []).append(i)
    by_id = {row.id: row for row in holders.values()}
    for trial, indices in list(fast.items()):
        if by_id[trial].points + sum(len(items[i].values) for i in indices) > MAX_POINTS_PER_TRIAL:
            del fast[trial]  # near its cap: one by one
            for i in indices:
                outcomes[i] = _one(c, items[i])
    rows = [{"trial_id": items[i].trial_id, "step": items[i].step, "name": name, "value": value,
             "reported_at": items[i].at}
            for indices in fast.values() for i in indices for name, value in sorted(items[i].values.items())]
    inserted: set[tuple[int, int, str]] = set()
    if rows:
        inserted = statements.insert_keyed(c, rows)
    moves: dict[bool | None, list[dict[str, Any]]] = {}
    for trial, indices in sorted(fast.items()):  # trials' rows taken in one order: API workers never deadlock
        metric, smaller = by_id[trial].metric, by_id[trial].smaller is not False  # the spec's default: smaller
        added, of_metric = 0, []
        for i in indices:
            item, stored = items[i], 0
            for name in item.values:
                if (trial, item.step, name) in inserted:
                    inserted.discard((trial, item.step, name))  # the first of two reports of a key stored it
                    stored += 1
                    if name == metric:
                        of_metric.append((item.step, item.values[name]))
            added += stored
            outcomes[i] = ReportAnswer(stored, bool(by_id[trial].stop_requested))
        params: dict[str, Any] = {"trial": trial, "added": added}
        if of_metric:
            params |= _summary(of_metric, smaller)
        moves.setdefault(smaller if of_metric else None, []).append(params)
    for direction, params_list in moves.items():
        statements.apply_moves(c, direction, params_list)
    done = [o for o in outcomes if o is not None]
    assert len(done) == len(items)
    return done


def _one(c: Connection, item: Incoming) -> Outcome:
    try:  # a Session on the batch's connection that never ends its transaction; the SAVEPOINT is the connection's
        with c.begin_nested(), Session(bind=c, join_transaction_mode="rollback_only") as s:
            return report(s, item.trial_id, item.step, item.values, now=item.at, known=True)
    except InvalidParametersError as e:
        return e


def series(s: Session, trial_id: int, name: str | None = None) -> dict[str, list[tuple[int, float]]]:
    """The trial's curves: for each metric (or only ``name``), its (step, value) points by step."""
    query = select(TrialMetricRow.name, TrialMetricRow.step, TrialMetricRow.value).where(
        TrialMetricRow.trial_id == trial_id).order_by(TrialMetricRow.name, TrialMetricRow.step)
    if name is not None:
        query = query.where(TrialMetricRow.name == name)
    curves: dict[str, list[tuple[int, float]]] = {}
    for row in s.execute(query):
        curves.setdefault(row.name, []).append((int(row.step), float(row.value)))
    return curves


def experiment_series(s: Session, experiment_id: int, name: str) -> dict[int, list[tuple[int, float]]]:
    """Every trial's curve of the metric ``name`` (the searcher's intermediate values), by trial id; a trial that has
    not reported it is absent."""
    query = (select(TrialMetricRow.trial_id, TrialMetricRow.step, TrialMetricRow.value)
             .join(TrialRow, TrialRow.id == TrialMetricRow.trial_id)
             .where(TrialRow.experiment_id == experiment_id, TrialMetricRow.name == name)
             .order_by(TrialMetricRow.trial_id, TrialMetricRow.step))
    curves: dict[int, list[tuple[int, float]]] = {}
    for row in s.execute(query):
        curves.setdefault(int(row.trial_id), []).append((int(row.step), float(row.value)))
    return curves


@dataclass
class Reported:
    """A trial's values at one step, and when the first of them arrived."""

    at: float
    values: dict[str, float]


def reports_of(s: Session, experiment_id: int, names: Iterable[str]) -> dict[int, dict[int, Reported]]:
    """The experiment's reports of the metrics ``names``: trial id -> step -> what it reported (what the searcher
    replays; a trial that reported none of them is absent)."""
    m = TrialMetricRow
    query = (select(m.trial_id, m.step, m.name, m.value, m.reported_at)
             .join(TrialRow, TrialRow.id == m.trial_id)
             .where(TrialRow.experiment_id == experiment_id, m.name.in_(sorted(set(names)))))
    reports: dict[int, dict[int, Reported]] = {}
    for row in s.execute(query):
        got = reports.setdefault(int(row.trial_id), {}).setdefault(int(row.step), Reported(float(row.reported_at), {}))
        got.values[row.name] = float(row.value)
        got.at = min(got.at, float(row.reported_at))
    return reports


def reports_at(s: Session, experiment_id: int, name: str, steps: Iterable[int]) -> dict[int, dict[int, Reported]]:
    """Like ``reports_of`` for the one metric ``name``, but only each trial's first report at or past each of
    ``steps`` (the searcher's rungs: what successive halving judges): a few rows per trial, however many it reported."""
    m = TrialMetricRow
    of_experiment = m.trial_id.in_(select(TrialRow.id).where(TrialRow.experiment_id == experiment_id))
    reports: dict[int, dict[int, Reported]] = {}
    for step in sorted(set(steps)):
        first = (select(m.trial_id, func.min(m.step).label("step"))
                 .where(of_experiment, m.name == name, m.step >= step).group_by(m.trial_id).subquery())
        query = (select(m.trial_id, m.step, m.value, m.reported_at)
                 .join(first, and_(m.trial_id == first.c.trial_id, m.step == first.c.step)).where(m.name == name))
        for row in s.execute(query):
            reports.setdefault(int(row.trial_id), {})[int(row.step)] = Reported(float(row.reported_at),
                                                                                {name: float(row.value)})
    return reports


def summaries(s: Session, experiment_id: int) -> dict[int, MetricSummary]:
    """For each trial of the experiment that reported its searcher's metric: its latest value and its best one (kept
    by the reports on the trial's row: no value is read)."""
    t = _TRIALS.c
    query = select(t.id, t.latest_step, t.latest_value, t.best_step, t.best_value).where(
        t.experiment_id == experiment_id, t.latest_step.is_not(None))
    return {int(r.id): MetricSummary(int(r.latest_step), float(r.latest_value), int(r.best_step), float(r.best_value))
            for r in s.execute(query)}


def add_checkpoint(s: Session, trial_id: int, step: object, path: str, metadata: dict[str, Any], *,
                   now: float | None = None) -> Checkpoint:
    """Record a checkpoint the trial wrote at ``step``; the same step again replaces it (the trial rewrote it)."""
    at_step, at = check_step(step), time.time() if now is None else now
    if not path or len(path) > 4096:
        raise InvalidParametersError("path: a checkpoint's path must be 1 to 4096 characters", field="path")
    if s.get(TrialRow, trial_id) is None:
        raise NoTrialError(f"trial {trial_id} not found")
    values = {"trial_id": trial_id, "step": at_step, "path": path, "metadata": metadata, "created_at": at}
    row = _insert(s)(TrialCheckpointRow).values(values)
    s.execute(row.on_conflict_do_update(index_elements=[TrialCheckpointRow.trial_id, TrialCheckpointRow.step],
                                        set_={"path": path, "metadata": metadata, "created_at": at}))
    return Checkpoint(trial_id, at_step, path, metadata, at)


def checkpoints_of(s: Session, trial_id: int) -> list[Checkpoint]:
    """The trial's checkpoints by step."""
    query = select(TrialCheckpointRow).where(TrialCheckpointRow.trial_id == trial_id).order_by(TrialCheckpointRow.step)
    return [Checkpoint(r.trial_id, r.step, r.path, r.meta, r.created_at) for r in s.scalars(query)]


def latest_checkpoint(s: Session, trial_id: int) -> Checkpoint | None:
    """The checkpoint of the trial's highest step; None when it has none."""
    row = s.scalars(select(TrialCheckpointRow).where(TrialCheckpointRow.trial_id == trial_id)
                    .order_by(TrialCheckpointRow.step.desc()).limit(1)).first()
    return None if row is None else Checkpoint(row.trial_id, row.step, row.path, row.meta, row.created_at)
