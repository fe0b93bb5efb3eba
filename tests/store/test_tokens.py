"""API tokens: issue, resolve until expiry, revoke."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from pai.domain.errors import NoUserError
from pai.store import tokens, users
from pai.store.db import Database
from tests.store.builders import admin, plain


@pytest.fixture
def alice(db: Database) -> Database:
    with db.session() as s:
        users.create_user(s, "alice", "pw", admin=True)
        users.create_user(s, "bob", "pw")
    return db


@pytest.mark.parametrize(
    ("now", "valid"),
    [
        pytest.param(1000.0, True, id="at issue"),
        pytest.param(1099.9, True, id="just before expiry"),
        pytest.param(1100.0, False, id="at expiry"),
        pytest.param(5000.0, False, id="long after"),
    ],
)
def test_token_expires_after_ttl(alice: Database, now: float, valid: bool) -> None:
    with alice.session() as s:
        token = tokens.issue_token(s, "alice", 100, now=1000.0)
    with alice.session() as s:
        assert tokens.resolve_token(s, token, now) == (admin("alice") if valid else None)


def test_token_without_ttl_never_expires(alice: Database) -> None:
    with alice.session() as s:
        token = tokens.issue_token(s, "bob", None, now=0)
        assert tokens.resolve_token(s, token, now=1e12) == plain("bob")


def test_tokens_are_stored_as_digests_only(alice: Database) -> None:
    with alice.session() as s:
        token = tokens.issue_token(s, "alice", 60)
        stored = s.execute(text("SELECT token_hash FROM tokens")).scalar_one()
    assert stored != token and token not in stored and len(stored) == 64


def test_unknown_or_tampered_token_resolves_to_nobody(alice: Database) -> None:
    with alice.session() as s:
        token = tokens.issue_token(s, "alice", 60, now=0)
        assert tokens.resolve_token(s, token + "x", now=1) is None
        assert tokens.resolve_token(s, "", now=1) is None


def test_issue_for_unknown_user(alice: Database) -> None:
    with alice.session() as s, pytest.raises(NoUserError, match="carol"):
        tokens.issue_token(s, "carol", 60)


def test_revoke(alice: Database) -> None:
    with alice.session() as s:
        keep = tokens.issue_token(s, "alice", 60, now=0)
        drop = tokens.issue_token(s, "alice", 60, now=0)
        assert tokens.revoke(s, drop) is True
        assert tokens.revoke(s, drop) is False
        assert tokens.resolve_token(s, drop, now=1) is None
        assert tokens.resolve_token(s, keep, now=1) is not None


def test_revoke_user_tokens_and_purge_expired(alice: Database) -> None:
    with alice.session() as s:
        a1 = tokens.issue_token(s, "alice", 10, now=0)
        tokens.issue_token(s, "alice", None, now=0)
        b_short = tokens.issue_token(s, "bob", 10, now=0)
        b_long = tokens.issue_token(s, "bob", 100, now=0)
        assert tokens.revoke_user_tokens(s, "alice") == 2
        assert tokens.resolve_token(s, a1, now=1) is None
        assert tokens.purge_expired(s, now=50) == 1
        assert tokens.resolve_token(s, b_short, now=5) is None  # purged
        assert tokens.resolve_token(s, b_long, now=50) == plain("bob")
