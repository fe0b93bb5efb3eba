"""API tokens: random ``token_urlsafe(32)`` strings handed to the client once; the database keeps sha256 digests.

A token is therefore never shown again: listing a user's tokens gives each one's *reference*
(``token_reference``, from its digest), which revoking accepts as well as the token itself.
"""

from __future__ import annotations

import re
import time

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from pai.domain.errors import NoUserError
from pai.store import users
from pai.store.credentials import new_token, token_digest
from pai.store.records import Caller, User
from pai.store.schema import TokenRow, UserRow

REFERENCE_PREFIX = "token-"


def token_reference(digest: str) -> str:
    """How a stored token is named in lists: its digest's first 16 hex digits (the digest itself reveals nothing
    of the token, and 64 bits tell a user's tokens apart)."""
    return REFERENCE_PREFIX + digest[:16]


def issue_token(s: Session, user: str, ttl_seconds: float | None, *, now: float | None = None,
                application: bool = False) -> str:
    """A new token for ``user`` valid for ``ttl_seconds`` (None: until revoked). Raises NoUserError."""
    user_id = s.scalar(select(UserRow.id).where(UserRow.name == user))
    if user_id is None:
        raise NoUserError(f"user {user} not found")
    issued = time.time() if now is None else now
    token = new_token()
    expires = None if ttl_seconds is None else issued + ttl_seconds
    s.add(TokenRow(token_hash=token_digest(token), user_id=user_id, expires_at=expires, created_at=issued,
                   application=application))
    s.flush()
    return token


def resolve_token(s: Session, token: str, now: float) -> User | None:
    """The token's user when the token exists and has not expired at ``now``."""
    found = lookup(s, token_digest(token))
    return found.user if found is not None and found.valid_at(now) else None


def lookup(s: Session, digest: str) -> Caller | None:
    """Who the token with this digest speaks for, expired or not; None if unknown."""
    row = s.execute(
        select(UserRow.name, TokenRow.expires_at, TokenRow.application, TokenRow.created_at)
        .join(TokenRow, TokenRow.user_id == UserRow.id)
        .where(TokenRow.token_hash == digest)
    ).one_or_none()
    user = None if row is None else users.get_user(s, row.name)
    if row is None or user is None:
        return None
    return Caller(user, row.expires_at, row.application, row.created_at)


def tokens_of(s: Session, user: str, now: float) -> dict[str, Caller]:
    """The user's tokens that have not expired at ``now``, by digest, oldest first."""
    rows = s.execute(
        select(TokenRow.token_hash, TokenRow.expires_at, TokenRow.application, TokenRow.created_at)
        .join(UserRow, TokenRow.user_id == UserRow.id)
        .where(UserRow.name == user)
        .order_by(TokenRow.created_at, TokenRow.token_hash)
    ).all()
    owner = users.get_user(s, user) if rows else None
    if owner is None:
        return {}
    found = {r.token_hash: Caller(owner, r.expires_at, r.application, r.created_at) for r in rows}
    return {digest: c for digest, c in found.items() if c.valid_at(now)}


def owner_by_reference(s: Session, reference: str) -> str | None:
    """The user whose token ``reference`` names (:func:`token_reference`), whoever it is; None when none does."""
    prefix = reference.removeprefix(REFERENCE_PREFIX)
    if not reference.startswith(REFERENCE_PREFIX) or re.fullmatch("[0-9a-f]{16}", prefix) is None:
        return None
    return s.scalar(
        select(UserRow.name).join(TokenRow, TokenRow.user_id == UserRow.id)
        .where(TokenRow.token_hash.startswith(prefix, autoescape=True)).limit(1)
    )


def revoke(s: Session, token: str) -> bool:
    """Forget ``token``; True when it existed."""
    return revoke_digest(s, token_digest(token))


def revoke_digest(s: Session, digest: str) -> bool:
    result = s.execute(delete(TokenRow).where(TokenRow.token_hash == digest))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def revoke_user_tokens(s: Session, user: str, *, application: bool | None = None) -> int:
    """Revoke the user's tokens (only the application ones, or only the others, when ``application`` says)."""
    user_id = select(UserRow.id).where(UserRow.name == user).scalar_subquery()
    query = delete(TokenRow).where(TokenRow.user_id == user_id)
    if application is not None:
        query = query.where(TokenRow.application == application)
    result = s.execute(query)
    return int(result.rowcount)  # type: ignore[attr-defined]


def purge_expired(s: Session, now: float) -> int:
    """Delete tokens that expired at or before ``now``; returns how many."""
    result = s.execute(delete(TokenRow).where(TokenRow.expires_at <= now))
    return int(result.rowcount)  # type: ignore[attr-defined]
