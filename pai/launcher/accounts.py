"""Logins and tokens: the one door for who is calling.

Resolving a token is on every request's path, so known tokens are cached in memory (by digest, with their
user and expiry; at most ``CACHE_SIZE``). Whatever changes users or tokens goes through this class and clears
the cache, so a revoked token or a demoted admin is refused on the next request, not after a delay.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from pai.domain.errors import UnauthorizedUserError
from pai.store import tokens, users
from pai.store.credentials import token_digest
from pai.store.db import Database
from pai.store.records import User

CACHE_SIZE = 10_000


class Accounts:
    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self.db = db
        self.clock = clock
        self._lock = threading.Lock()  # readers resolve tokens from several threads
        self._cache: OrderedDict[str, tuple[User, float | None]] = OrderedDict()
        self._generation = 0  # bumped by invalidate: a lookup that raced with it is not cached

    def login(self, name: str, password: str, expiration: int) -> tuple[str, User]:
        """A new token for ``name`` when ``password`` is theirs; else UnauthorizedUserError."""
        with self.db.session() as s:
            user = users.verify_password(s, name, password)
            if user is None:
                raise UnauthorizedUserError("the user name or password is not correct")
            return tokens.issue_token(s, user.name, expiration, now=self.clock()), user

    def ensure_admin(self, name: str, password: str) -> None:
        """Create ``name`` as an admin when absent (the master's first start); an existing user is kept."""
        with self.db.session() as s:
            users.ensure_admin(s, name, password)
        self.invalidate()

    def user_of(self, token: str) -> User | None:
        """The token's user while it is valid (read-only: runs on a reader thread)."""
        digest = token_digest(token)
        now = self.clock()
        with self._lock:
            hit = self._cache.get(digest)
            if hit is not None:
                self._cache.move_to_end(digest)
            generation = self._generation
        if hit is not None:
            user, expires = hit
            return user if expires is None or expires > now else None
        with self.db.session() as s:
            found = tokens.lookup(s, digest)
        if found is None:
            return None
        with self._lock:
            if generation == self._generation:  # else a revoke committed meanwhile: what was read may be gone
                self._cache[digest] = found
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        user, expires = found
        return user if expires is None or expires > now else None

    def invalidate(self) -> None:
        """Forget every cached token: call after any change to users or tokens."""
        with self._lock:
            self._cache.clear()
            self._generation += 1
