"""The statements that store trial reports (``pai.store.trial_reports``): Core statements on the tables, built once.

``holders``, ``insert_keyed`` and ``apply_moves`` run a batch's three statements (``report_many``). On PostgreSQL
they go through SQLAlchemy's execution. On SQLite, where the master's one writer thread stores every batch and a
batch is mostly one to four reports, they go to the driver's cursor on the transaction's connection, as SQL that
SQLAlchemy compiled from the same statements (once per shape, with positional bound parameters): SQLAlchemy's own
execution of a statement (its context, its cache lookup, its result processing) was most of a batch's CPU. ADR 0003
(addendum) says what it costs and what it buys, measured.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache, lru_cache
from typing import Any, cast

from sqlalchemy import BigInteger, BindParameter, Double, Table, and_, bindparam, case, func, or_, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from pai.store.dialects import insert_new
from pai.store.schema import ExperimentRow, TrialMetricRow, TrialRow

_METRICS, _TRIALS = cast(Table, TrialMetricRow.__table__), cast(Table, TrialRow.__table__)
_EXPERIMENTS = cast(Table, ExperimentRow.__table__)
# Built once (a report is the hottest write of an experiment): Core statements on the tables, compiled once per
# dialect and cached by SQLAlchemy. RETURNING names the rows inserted (a conflicting one returns nothing): a rowcount
# is not reliable on every driver.
INSERTS = insert_new(_METRICS, _METRICS.c.name)


@cache
def move(smaller: bool | None, *, guarded: bool) -> Any:
    """The update of a trial's row after a report: its count of values (``guarded``: only within the cap, returning
    whether the trial should stop), and, when the report stored a value of the searcher's metric (``smaller``: its
    direction; None: none stored), its latest and best value. Conditions on the row as it was, as SQL's SET reads it:
    two API workers' reports of one trial at once keep the later step and the better value, whatever their order."""
    t = _TRIALS.c
    values: dict[str, Any] = {"points": t.points + bindparam("added")}
    if smaller is not None:
        ls, bs = bindparam("ls", type_=BigInteger()), bindparam("bs", type_=BigInteger())
        lv: BindParameter[float] = bindparam("lv", type_=Double())
        bv: BindParameter[float] = bindparam("bv", type_=Double())
        later = or_(t.latest_step.is_(None), t.latest_step < ls)
        improves = (t.best_value > bv) if smaller else (t.best_value < bv)
        better = or_(t.best_value.is_(None), improves, and_(t.best_value == bv, t.best_step > bs))
        values |= {"latest_step": case((later, ls), else_=t.latest_step),
                   "latest_value": case((later, lv), else_=t.latest_value),
                   "best_step": case((better, bs), else_=t.best_step),
                   "best_value": case((better, bv), else_=t.best_value)}
    statement = update(_TRIALS).where(t.id == bindparam("trial")).values(**values)
    if guarded:
        statement = statement.where(t.points + bindparam("added") <= bindparam("cap")).returning(t.stop_requested)
    return statement


INSERTS_KEYED = insert_new(_METRICS, _METRICS.c.trial_id, _METRICS.c.step, _METRICS.c.name)
# The batch's trials by their tokens' digests, each with its experiment's searcher metric and direction read out of
# the spec by the database (one statement, no spec decoded here: a batch is often a single report)
HOLDERS_OF = (select(_TRIALS.c.id, _TRIALS.c.experiment_id, _TRIALS.c.token_hash, _TRIALS.c.points,
                     _TRIALS.c.stop_requested, _EXPERIMENTS.c.spec[("searcher", "metric")].as_string().label("metric"),
                     _EXPERIMENTS.c.spec[("searcher", "smallerIsBetter")].as_boolean().label("smaller"))
              .join(_EXPERIMENTS, _EXPERIMENTS.c.id == _TRIALS.c.experiment_id))
_HOLDERS = HOLDERS_OF.where(_TRIALS.c.token_hash.in_(bindparam("digests", expanding=True)))


INSERT_CHUNK = 500  # rows of one multi-row INSERT on SQLite (5 parameters a row: SQLite takes 32,766 at most)
_SQLITE = sqlite.dialect()


@lru_cache(maxsize=64)
def _sqlite_sql(statement: Any) -> tuple[str, tuple[str, ...], dict[str, Any]]:
    """``statement`` compiled for SQLite: its SQL (``?`` parameters), the names of its parameters in order, and the
    values of those it holds itself."""
    compiled = statement.compile(dialect=_SQLITE)
    names = tuple(compiled.positiontup or ())
    return compiled.string, names, {name: value for name, value in compiled.params.items() if value is not None}


# SQLite's own JSON functions: the paths are plain text parameters (the JSON type's paths need its bind processing)
_SQLITE_HOLDERS_OF = (select(_TRIALS.c.id, _TRIALS.c.experiment_id, _TRIALS.c.token_hash, _TRIALS.c.points,
                             _TRIALS.c.stop_requested, func.json_extract(_EXPERIMENTS.c.spec, "$.searcher.metric"),
                             func.json_extract(_EXPERIMENTS.c.spec, "$.searcher.smallerIsBetter"))
                      .join(_EXPERIMENTS, _EXPERIMENTS.c.id == _TRIALS.c.experiment_id))


@lru_cache(maxsize=64)
def _holders_of(n: int) -> Any:
    return _SQLITE_HOLDERS_OF.where(_TRIALS.c.token_hash.in_([bindparam(f"d{i}") for i in range(n)]))


@lru_cache(maxsize=64)
def _insert_of(n: int) -> Any:
    columns = ("trial_id", "step", "name", "value", "reported_at")
    rows: list[dict[str, Any]] = [{c: bindparam(f"{c}_{i}") for c in columns} for i in range(n)]
    return sqlite.insert(_METRICS).values(rows).on_conflict_do_nothing().returning(
        _METRICS.c.trial_id, _METRICS.c.step, _METRICS.c.name)


def _cursor(c: Connection) -> Any:
    return c.connection.driver_connection.cursor()  # type: ignore[union-attr]


def _ordered(sql: tuple[str, tuple[str, ...], dict[str, Any]], params: dict[str, Any]) -> tuple[Any, ...]:
    _, names, held = sql
    return tuple(params[name] if name in params else held[name] for name in names)


class Holder:
    """A batch's trial, found by its token's digest (the columns of ``HOLDERS_OF``)."""

    __slots__ = ("experiment_id", "id", "metric", "points", "smaller", "stop_requested", "token_hash")

    def __init__(self, row: Sequence[Any]) -> None:
        self.id, self.experiment_id, self.token_hash = int(row[0]), int(row[1]), str(row[2])
        self.points, self.stop_requested, self.metric = int(row[3]), bool(row[4]), row[5]
        self.smaller: bool | None = None if row[6] is None else bool(row[6])


def holders(c: Connection, digests: Sequence[str]) -> list[Holder]:
    """The trials whose tokens have these digests, with their experiments' searcher metric and direction."""
    if c.dialect.name != "sqlite":
        return [Holder(tuple(row)) for row in c.execute(_HOLDERS, {"digests": list(digests)})]
    sql = _sqlite_sql(_holders_of(len(digests)))
    params = {f"d{i}": digest for i, digest in enumerate(digests)}
    return [Holder(row) for row in _cursor(c).execute(sql[0], _ordered(sql, params))]


def insert_keyed(c: Connection, rows: Sequence[dict[str, Any]]) -> set[tuple[int, int, str]]:
    """Insert the metric values ``rows`` (each key's first value stays); the keys inserted."""
    if c.dialect.name != "sqlite":
        return {(int(r.trial_id), int(r.step), r.name) for r in c.execute(INSERTS_KEYED[c.dialect.name], rows)}
    inserted: set[tuple[int, int, str]] = set()
    cursor = _cursor(c)
    for start in range(0, len(rows), INSERT_CHUNK):
        chunk = rows[start:start + INSERT_CHUNK]
        sql = _sqlite_sql(_insert_of(len(chunk)))
        params = {f"{column}_{i}": row[column] for i, row in enumerate(chunk) for column in row}
        found = cursor.execute(sql[0], _ordered(sql, params))
        inserted.update((int(t), int(step), str(name)) for t, step, name in found)
    return inserted


def apply_moves(c: Connection, smaller: bool | None, params: Iterable[dict[str, Any]]) -> None:
    """Each trial's row moved after a batch (``move(smaller, guarded=False)``, one set of parameters a trial)."""
    statement = move(smaller, guarded=False)
    if c.dialect.name != "sqlite":
        c.execute(statement, list(params))
        return
    sql = _sqlite_sql(statement)
    _cursor(c).executemany(sql[0], [_ordered(sql, p) for p in params])
