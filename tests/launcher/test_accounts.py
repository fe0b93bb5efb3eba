"""Logins and the token cache: a cached token still expires on time, and a change to users clears the cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pai.domain.errors import IncorrectPasswordError, UnknownUserError
from pai.launcher.accounts import Accounts
from pai.store import credentials, tokens, users
from pai.store.db import Database
from tests.launcher.builders import Clock


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    monkeypatch.setattr(credentials, "DEFAULT_PARAMS", credentials.ScryptParams(n=2**4, r=8, p=1))
    database = Database(f"sqlite:///{tmp_path / 'pai.db'}")
    database.migrate()
    yield database
    database.dispose()


def test_login_issues_a_token_that_resolves_to_its_user_until_it_expires(db: Database) -> None:
    clock = Clock(1000.0)
    accounts = Accounts(db, clock)
    accounts.ensure_admin("admin", "pw")
    with pytest.raises(IncorrectPasswordError):
        accounts.login("admin", "wrong", 60)
    with pytest.raises(UnknownUserError):
        accounts.login("nobody", "pw", 60)
    token, user = accounts.login("admin", "pw", 60)
    assert (user.name, user.admin) == ("admin", True)
    assert accounts.user_of(token) == user
    assert accounts.user_of(token) == user  # now from the cache
    clock.now = 1061.0
    assert accounts.user_of(token) is None  # the cached entry expires with the token
    assert accounts.user_of("not-a-token") is None


def test_a_revoked_token_is_refused_once_the_cache_is_cleared(db: Database) -> None:
    accounts = Accounts(db, Clock(1000.0))
    accounts.ensure_admin("admin", "pw")
    token, _ = accounts.login("admin", "pw", 3600)
    assert accounts.user_of(token) is not None
    with db.session() as s:
        assert tokens.revoke(s, token)
        users.set_admin(s, "admin", False)
    assert accounts.user_of(token) is not None  # the cache answers until told
    accounts.invalidate()
    assert accounts.user_of(token) is None


def test_a_lookup_that_raced_with_a_revoke_is_not_cached(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    accounts = Accounts(db, Clock(1000.0))
    accounts.ensure_admin("admin", "pw")
    token, _ = accounts.login("admin", "pw", 3600)
    real_lookup = tokens.lookup

    def lookup_then_revoke(s, digest):  # type: ignore[no-untyped-def]
        found = real_lookup(s, digest)  # read before the revoke committed
        with db.session() as w:
            tokens.revoke(w, token)
        accounts.invalidate()
        return found

    monkeypatch.setattr(tokens, "lookup", lookup_then_revoke)
    assert accounts.user_of(token) is not None  # this request started before the revoke: it is let through
    monkeypatch.setattr(tokens, "lookup", real_lookup)
    assert accounts.user_of(token) is None  # and the next one is refused at once
