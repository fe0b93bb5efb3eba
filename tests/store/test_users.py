"""Users: creation, lookup, password verification, admin bootstrap."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from pai.domain.errors import ConflictUserError, NoUserError
from pai.store import tokens, users
from pai.store.db import Database
from pai.store.records import User
from tests.store.builders import admin, plain


def test_create_and_get(db: Database) -> None:
    with db.session() as s:
        assert users.create_user(s, "alice", "pw") == plain("alice")
        users.create_user(s, "root", "pw", admin=True)
    with db.session() as s:
        assert users.get_user(s, "alice") == plain("alice")
        assert users.get_user(s, "root") == admin("root")
        assert users.get_user(s, "nobody") is None
        assert users.list_users(s) == [plain("alice"), admin("root")]


def test_password_is_stored_hashed(db: Database) -> None:
    with db.session() as s:
        users.create_user(s, "alice", "plain-secret")
        stored = s.execute(text("SELECT password_hash FROM users")).scalar_one()
    assert stored.startswith("scrypt$") and "plain-secret" not in stored


def test_duplicate_name_conflicts_and_session_stays_usable(db: Database) -> None:
    with db.session() as s:
        users.create_user(s, "alice", "one")
    with db.session() as s:
        with pytest.raises(ConflictUserError, match="alice"):
            users.create_user(s, "alice", "two")
        users.create_user(s, "bob", "pw")
    with db.session() as s:
        assert [u.name for u in users.list_users(s)] == ["alice", "bob"]
        assert users.verify_password(s, "alice", "one") is not None


@pytest.mark.parametrize(
    ("name", "password", "expected"),
    [
        pytest.param("alice", "pw-a", plain("alice"), id="right password"),
        pytest.param("alice", "pw-b", None, id="someone else's password"),
        pytest.param("alice", "", None, id="empty password"),
        pytest.param("carol", "pw-a", None, id="unknown user"),
    ],
)
def test_verify_password(db: Database, name: str, password: str, expected: User | None) -> None:
    with db.session() as s:
        users.create_user(s, "alice", "pw-a")
        users.create_user(s, "bob", "pw-b")
    with db.session() as s:
        assert users.verify_password(s, name, password) == expected


def test_ensure_admin_creates_once_and_keeps_existing(db: Database) -> None:
    with db.session() as s:
        assert users.ensure_admin(s, "admin", "first") == admin("admin")
    with db.session() as s:
        assert users.ensure_admin(s, "admin", "second") == admin("admin")
        assert users.verify_password(s, "admin", "first") is not None
        assert users.verify_password(s, "admin", "second") is None
        assert len(users.list_users(s)) == 1


def test_set_password_and_admin(db: Database) -> None:
    with db.session() as s:
        users.create_user(s, "alice", "old")
        users.set_password(s, "alice", "new")
        assert users.set_admin(s, "alice", True) == admin("alice")
    with db.session() as s:
        assert users.verify_password(s, "alice", "old") is None
        assert users.verify_password(s, "alice", "new") == admin("alice")
        with pytest.raises(NoUserError):
            users.set_password(s, "ghost", "x")


def test_delete_user_drops_their_tokens(db: Database) -> None:
    with db.session() as s:
        users.create_user(s, "alice", "pw")
        token = tokens.issue_token(s, "alice", 60, now=0)
    with db.session() as s:
        users.delete_user(s, "alice")
    with db.session() as s:
        assert users.get_user(s, "alice") is None
        assert tokens.resolve_token(s, token, now=1) is None
        assert s.execute(text("SELECT count(*) FROM tokens")).scalar() == 0
        with pytest.raises(NoUserError):
            users.delete_user(s, "alice")
