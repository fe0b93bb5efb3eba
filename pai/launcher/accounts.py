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

    def cached_user(self, token: str) -> tuple[bool, User | None]:
        """``(True, the token's user or None)`` when the cache knows the token; ``(False, None)`` when only the store
        can tell (``user_of``). Touches no database: the event loop asks this first and saves a thread hop."""
        hit, _ = self._cached(token_digest(token))
        return (False, None) if hit is None else (True, self._valid(hit))

    def user_of(self, token: str) -> User | None:
        """The token's user while it is valid (read-only: runs on a reader thread)."""
        digest = token_digest(token)
        hit, generation = self._cached(digest)
        if hit is not None:
            return self._valid(hit)
        with self.db.session() as s:
            found = tokens.lookup(s, digest)
        if found is None:
            return None
        with self._lock:
            if generation == self._generation:  # else a revoke committed meanwhile: what was read may be gone
                self._cache[digest] = found
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        return self._valid(found)

    def _cached(self, digest: str) -> tuple[tuple[User, float | None] | None, int]:
        with self._lock:
            hit = self._cache.get(digest)
            if hit is not None:
                self._cache.move_to_end(digest)
            return hit, self._generation

    def _valid(self, entry: tuple[User, float | None]) -> User | None:
        user, expires = entry
        return user if expires is None or expires > self.clock() else None

    def invalidate(self) -> None:
        """Forget every cached token: call after any change to users or tokens."""
        with self._lock:
            self._cache.clear()
            self._generation += 1
