"""Users' open interactive sessions (exec, tunnels): one row each (``InteractiveSessionRow``), written when the session
opens, its ``seen_at`` refreshed while it lives, deleted when it ends. A row not refreshed for ``stale_after`` seconds
is not counted (the API worker that served it died) and is deleted by the next open.

``open_session`` counts and adds in one transaction, holding the user's row (PostgreSQL: ``FOR UPDATE``; SQLite: the
database's one writer), so that two opens at once on two API workers never both take the last place. Times as in
``pai.store.leases``: the database server's on PostgreSQL, the caller's on SQLite.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from pai.domain.errors import TooManySessionsError
from pai.store.leases import clock
from pai.store.schema import InteractiveSessionRow, UserRow


@dataclass(frozen=True, slots=True)
class OpenSession:
    id: str
    user: str
    job_id: str
    kind: str
    detail: str


def live(s: Session, user: str, stale_after: float, *, now: float | None = None) -> int:
    """How many sessions ``user`` has open (refreshed in the last ``stale_after`` seconds)."""
    query = select(func.count()).select_from(InteractiveSessionRow).where(
        InteractiveSessionRow.user_name == user, InteractiveSessionRow.seen_at >= clock(s, now) - stale_after)
    return int(s.scalar(query) or 0)


def require_room(s: Session, user: str, *, limit: int, stale_after: float, now: float | None = None) -> None:
    """TooManySessionsError (429) when ``user`` has ``limit`` sessions open."""
    count = live(s, user, stale_after, now=now)
    if count >= limit:
        raise TooManySessionsError(
            f"user {user} has {count} interactive sessions open (exec, tunnels), the most this cluster allows "
            f"(max_sessions_per_user {limit}, pai master --max-sessions-per-user); end one first")


def open_session(s: Session, session: OpenSession, *, limit: int, stale_after: float,
                 now: float | None = None) -> None:
    """Add ``session`` unless its user has ``limit`` open already: TooManySessionsError (429)."""
    s.execute(select(UserRow.id).where(UserRow.name == session.user).with_for_update())
    at = clock(s, now)
    s.execute(delete(InteractiveSessionRow).where(InteractiveSessionRow.seen_at < at - stale_after))
    require_room(s, session.user, limit=limit, stale_after=stale_after, now=now)
    s.add(InteractiveSessionRow(id=session.id, user_name=session.user, job_id=session.job_id, kind=session.kind,
                                detail=session.detail, opened_at=at, seen_at=at))
    s.flush()


def touch(s: Session, session_id: str, *, now: float | None = None) -> bool:
    """The session is alive; False when its row is gone (deleted as stale, or with its job)."""
    result = s.execute(update(InteractiveSessionRow).where(InteractiveSessionRow.id == session_id)
                       .values(seen_at=clock(s, now)))
    return bool(getattr(result, "rowcount", 0))


def close_session(s: Session, session_id: str) -> None:
    s.execute(delete(InteractiveSessionRow).where(InteractiveSessionRow.id == session_id))
