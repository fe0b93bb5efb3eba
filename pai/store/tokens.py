"""API tokens: random ``token_urlsafe(32)`` strings handed to the client once; the database keeps sha256 digests."""

from __future__ import annotations

import time

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from pai.domain.errors import NoUserError
from pai.store.credentials import new_token, token_digest
from pai.store.records import User
from pai.store.schema import TokenRow, UserRow


def issue_token(s: Session, user: str, ttl_seconds: float | None, *, now: float | None = None) -> str:
    """A new token for ``user`` valid for ``ttl_seconds`` (None: until revoked). Raises NoUserError."""
    user_id = s.scalar(select(UserRow.id).where(UserRow.name == user))
    if user_id is None:
        raise NoUserError(f"user {user} not found")
    issued = time.time() if now is None else now
    token = new_token()
    expires = None if ttl_seconds is None else issued + ttl_seconds
    s.add(TokenRow(token_hash=token_digest(token), user_id=user_id, expires_at=expires, created_at=issued))
    s.flush()
    return token


def resolve_token(s: Session, token: str, now: float) -> User | None:
    """The token's user when the token exists and has not expired at ``now``."""
    found = lookup(s, token_digest(token))
    if found is None or (found[1] is not None and found[1] <= now):
        return None
    return found[0]


def lookup(s: Session, digest: str) -> tuple[User, float | None] | None:
    """The user and expiry (None: never) of the token with this digest, expired or not; None if unknown."""
    row = s.execute(
        select(UserRow.name, UserRow.admin, TokenRow.expires_at)
        .join(TokenRow, TokenRow.user_id == UserRow.id)
        .where(TokenRow.token_hash == digest)
    ).one_or_none()
    return None if row is None else (User(name=row.name, admin=row.admin), row.expires_at)


def revoke(s: Session, token: str) -> bool:
    """Forget ``token``; True when it existed."""
    result = s.execute(delete(TokenRow).where(TokenRow.token_hash == token_digest(token)))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def revoke_user_tokens(s: Session, user: str) -> int:
    user_id = select(UserRow.id).where(UserRow.name == user).scalar_subquery()
    result = s.execute(delete(TokenRow).where(TokenRow.user_id == user_id))
    return int(result.rowcount)  # type: ignore[attr-defined]


def purge_expired(s: Session, now: float) -> int:
    """Delete tokens that expired at or before ``now``; returns how many."""
    result = s.execute(delete(TokenRow).where(TokenRow.expires_at <= now))
    return int(result.rowcount)  # type: ignore[attr-defined]
