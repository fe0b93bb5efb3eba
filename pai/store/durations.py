"""Typical run times: how long a user's jobs in a virtual cluster usually run, for when a running job that declared
no ``extras.expectedDurationSeconds`` should end (the ETAs of waiting reasons' unblock hints).

A pair ``(user, vc)``'s typical run time is the median of the run times of that user's last ``LAST`` (20) SUCCEEDED
jobs in that VC, latest completion first, when there are at least ``LEAST`` (3) of them; otherwise there is none.
A job's run time is ``completed_at - started_at`` of its row: ``started_at`` is set anew each time the job is
admitted, so a retried or requeued job counts its last attempt only. Jobs that failed or were stopped say nothing
about how long a job needs, and are left out.

One query serves many pairs (``CHUNK`` at a time): a ``UNION ALL`` of one ``ORDER BY completed_at DESC LIMIT 20``
per pair, each a backward range of the index ``(user_name, vc, state, completed_at, started_at)`` (migration
0013) that reads at most ``LAST`` index entries and no table row, however many jobs the user has run.
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import median

from sqlalchemy import Select, select, union_all
from sqlalchemy.orm import Session

from pai.domain.states import JobState
from pai.store.schema import JobRow

LAST = 20  # the latest successful jobs of a pair that count
LEAST = 3  # fewer successful jobs than this: no typical run time
CHUNK = 100  # pairs per query (SQLite allows 500 terms in a compound SELECT and 999 parameters in old builds)

Pair = tuple[str, str]  # (user, vc)


def typical_run_seconds(s: Session, pairs: Iterable[Pair], *, last: int = LAST,
                        least: int = LEAST) -> dict[Pair, float]:
    """The typical run time in seconds of each ``(user, vc)`` pair that has one; pairs without are left out."""
    todo = sorted(set(pairs))
    runs: dict[Pair, list[float]] = {}
    for at in range(0, len(todo), CHUNK):
        for user, vc, seconds in s.execute(_query(todo[at:at + CHUNK], last)):
            runs.setdefault((user, vc), []).append(max(seconds or 0.0, 0.0))  # (never None: filtered)
    return {pair: float(median(r)) for pair, r in runs.items() if len(r) >= least}


def _query(pairs: list[Pair], last: int) -> Select[str, str, float | None]:
    parts = [_latest(user, vc, last) for user, vc in pairs]
    if len(parts) == 1:
        return parts[0]
    # each part in its own subquery: SQLite refuses ORDER BY and LIMIT on the members of a compound SELECT
    subqueries = [p.subquery() for p in parts]
    every = union_all(*(select(q.c.user_name, q.c.vc, q.c.seconds) for q in subqueries)).subquery()
    return select(every.c.user_name, every.c.vc, every.c.seconds)


def _latest(user: str, vc: str, last: int) -> Select[str, str, float | None]:
    """The run times of the user's latest ``last`` successful jobs in the VC: one backward index range."""
    return (select(JobRow.user_name, JobRow.vc, (JobRow.completed_at - JobRow.started_at).label("seconds"))
            .where(JobRow.user_name == user, JobRow.vc == vc, JobRow.state == JobState.SUCCEEDED.value,
                   JobRow.completed_at.is_not(None), JobRow.started_at.is_not(None))
            .order_by(JobRow.completed_at.desc())
            .limit(last))
