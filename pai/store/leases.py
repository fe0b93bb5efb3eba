"""Leases: one row per lease, held by one holder at a time, with an epoch that fences the holder's writes.

``acquire_or_renew`` is one statement (``INSERT ... ON CONFLICT DO UPDATE ... WHERE ... RETURNING``), so that two
masters asking at once never both get the lease: the database serialises them on the row. A change of holder (a
takeover after expiry or release, or the holder starting a new term) bumps the epoch; a renewal keeps it. The epoch
only grows: a released lease keeps its row (holder ``""``), and nothing deletes one.

Times are seconds since the epoch. On PostgreSQL they are the database server's (``statement_timestamp()``), so that
masters whose clocks disagree agree on when a lease runs out; on SQLite, one machine anyway, the caller's (``now``,
default ``time.time()``).

``fenced(s, name, epoch)`` goes first in every write transaction of a leader: it raises FencedError when the lease has
moved on, and holds the row (PostgreSQL: ``FOR SHARE``; SQLite: the database's write lock) until the transaction ends,
so that a takeover waits for the write instead of interleaving with it.
"""

from __future__ import annotations

import time
import typing
from dataclasses import dataclass
from typing import Any

from sqlalchemy import CursorResult, Double, and_, cast, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from pai.domain.errors import FencedError
from pai.store.schema import LeaseRow

LAUNCHER = "launcher"  # the lease of the master whose launcher leads
RELEASED = ""  # the holder of a released lease

_COLUMNS = (LeaseRow.name, LeaseRow.holder, LeaseRow.epoch, LeaseRow.renewed_at, LeaseRow.expires_at)


@dataclass(frozen=True, slots=True)
class LeaseState:
    name: str
    holder: str  # RELEASED: nobody
    epoch: int
    renewed_at: float
    expires_at: float

    def held_by(self, holder: str) -> bool:
        return holder != RELEASED and self.holder == holder


def acquire_or_renew(s: Session, name: str, holder: str, duration: float, *, epoch: int | None = None,
                     stale_after: float | None = None, now: float | None = None) -> LeaseState:
    """Ask for the lease ``name`` for ``duration`` seconds; returns the lease as it is afterwards (``held_by(holder)``
    tells whether ``holder`` has it).

    ``epoch=None`` acquires: ``holder`` gets the lease, at the next epoch, when nobody holds it, its lease ran out or
    was released, or ``holder`` held it already (a new term); with ``stale_after``, also when its holder has not
    renewed it for that long (the caller knows the holder is gone: ``pai.store.liveness``). ``epoch=n`` renews: it
    is extended, epoch kept, only while ``holder`` holds it at epoch ``n``. ``now``: SQLite only (PostgreSQL reads
    its own clock)."""
    if holder == RELEASED:
        raise ValueError("a lease holder needs a name")
    at = clock(s, now)
    if epoch is None:
        may: ColumnElement[bool] = or_(LeaseRow.holder == holder, LeaseRow.holder == RELEASED,
                                       LeaseRow.expires_at < at)
        if stale_after is not None:
            may = or_(may, LeaseRow.renewed_at < at - stale_after)
        next_epoch: Any = LeaseRow.epoch + 1
    else:
        may = and_(LeaseRow.holder == holder, LeaseRow.epoch == epoch)
        next_epoch = LeaseRow.epoch
    insert = postgresql.insert if dialect(s) == "postgresql" else sqlite.insert
    statement = (
        insert(LeaseRow)
        .values(name=name, holder=holder, epoch=1, renewed_at=at, expires_at=at + duration)
        .on_conflict_do_update(index_elements=[LeaseRow.name], where=may, set_={
            "holder": holder, "epoch": next_epoch, "renewed_at": at, "expires_at": at + duration})
        .returning(*_COLUMNS)
    )
    row = s.execute(statement).one_or_none()
    if row is None:  # not ours: as it is now (READ COMMITTED reads the winner's row)
        row = s.execute(select(*_COLUMNS).where(LeaseRow.name == name)).one()
    return LeaseState(*row)


def release(s: Session, name: str, holder: str, epoch: int, *, now: float | None = None) -> bool:
    """Give the lease up at once, so that another can take it without waiting for it to run out; False when
    ``holder`` did not hold it at ``epoch`` (it changes nothing then)."""
    result = s.execute(
        update(LeaseRow)
        .where(LeaseRow.name == name, LeaseRow.holder == holder, LeaseRow.epoch == epoch, LeaseRow.holder != RELEASED)
        .values(holder=RELEASED, expires_at=clock(s, now))
    )
    return bool(typing.cast(CursorResult[Any], result).rowcount)


def current(s: Session, name: str) -> LeaseState | None:
    row = s.execute(select(*_COLUMNS).where(LeaseRow.name == name)).one_or_none()
    return None if row is None else LeaseState(*row)


def fenced(s: Session, name: str, epoch: int) -> None:
    """Raise FencedError unless the lease ``name`` is held at ``epoch``; else hold it as it is until ``s``'s
    transaction ends. Call it first in the transaction: on SQLite a transaction that has read before cannot take the
    write lock once a takeover has committed (it fails with "database is locked" instead)."""
    if dialect(s) == "sqlite":
        # SQLite has one writer: a no-op write takes its lock now, so no takeover commits before this transaction.
        s.execute(update(LeaseRow).where(LeaseRow.name == name).values(epoch=LeaseRow.epoch))
    row = s.execute(select(LeaseRow.epoch, LeaseRow.holder).where(LeaseRow.name == name)
                    .with_for_update(read=True)).one_or_none()
    if row is None:
        raise FencedError(name, epoch, None, None)
    if row.epoch != epoch or row.holder == RELEASED:
        raise FencedError(name, epoch, row.epoch, row.holder)


def dialect(s: Session) -> str:
    return s.get_bind().dialect.name


def clock(s: Session, now: float | None) -> Any:
    """The time of this statement: PostgreSQL's clock (a SQL expression), else ``now`` or this machine's."""
    if dialect(s) == "postgresql":
        return cast(func.extract("epoch", func.statement_timestamp()), Double)
    return time.time() if now is None else now
