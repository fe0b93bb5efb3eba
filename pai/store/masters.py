"""The masters that ask for the launcher's lease: one row each (``MasterRow``), written with every lease tick, so that
``GET /api/v2/masters`` lists them with their roles. Times as in ``pai.store.leases``: the database server's on
PostgreSQL, the caller's on SQLite."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from pai.store import leases
from pai.store.leases import LeaseState, clock, dialect
from pai.store.schema import MasterRow

FORGET_SECONDS = 3600.0  # a master not seen for this long loses its row


@dataclass(frozen=True, slots=True)
class Master:
    holder: str
    url: str
    role: str  # "leader" | "standby"
    epoch: int
    seen_at: float  # the leader: its lease's last renewal; a standby: its last attempt at the lease


def url_of(holder: str) -> str | None:
    """The base URL in a lease holder ("<url>#<random>"); None for a released lease."""
    return holder.rsplit("#", 1)[0] if holder != leases.RELEASED else None


def seen(s: Session, holder: str, epoch: int, *, url: str | None = None, now: float | None = None) -> None:
    """``holder`` asked for the lease just now; its epoch is the one it leads at (a standby: the lease's). ``url``:
    its users' API (default: the launcher's, in the holder's name)."""
    at = clock(s, now)
    url = url or url_of(holder) or holder
    insert = postgresql.insert if dialect(s) == "postgresql" else sqlite.insert
    s.execute(insert(MasterRow).values(holder=holder, url=url, epoch=epoch, seen_at=at).on_conflict_do_update(
        index_elements=[MasterRow.holder], set_={"url": url, "epoch": epoch, "seen_at": at}))
    s.execute(delete(MasterRow).where(MasterRow.seen_at < at - FORGET_SECONDS))


def recent(s: Session, within: float, *, now: float | None = None) -> list[Master]:
    """The masters seen in the last ``within`` seconds, the leader first: the holder of the unexpired launcher
    lease leads."""
    at = clock(s, now)
    lease: LeaseState | None = leases.current(s, leases.LAUNCHER)
    rows = s.execute(select(MasterRow.holder, MasterRow.url, MasterRow.epoch, MasterRow.seen_at)
                     .where(MasterRow.seen_at >= at - within).order_by(MasterRow.url)).all()
    leader = lease.holder if lease is not None and lease.expires_at >= _value(s, at) else leases.RELEASED
    out = [Master(r.holder, r.url, "leader", r.epoch, _value(s, lease.renewed_at)) if lease is not None
           and leader == r.holder != leases.RELEASED else Master(r.holder, r.url, "standby", r.epoch, r.seen_at)
           for r in rows]
    return sorted(out, key=lambda m: m.role != "leader")


def _value(s: Session, at: object) -> float:
    """``at`` as a number (PostgreSQL's clock is a SQL expression)."""
    return at if isinstance(at, float) else float(s.execute(select(at)).scalar_one())  # type: ignore[call-overload]


def forget(s: Session, holder: str) -> None:
    """``holder`` has stopped (or was refused): it is listed no more."""
    s.execute(delete(MasterRow).where(MasterRow.holder == holder))
