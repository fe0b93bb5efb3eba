"""Logins and tokens: the one door for who is calling.

Resolving a token is on every request's path, so known tokens are cached in memory (by digest, with their
user and expiry; at most ``CACHE_SIZE``). Whatever changes users or tokens goes through this class and clears
the cache, so a revoked token or a demoted admin is refused on the next request, not after a delay.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from pai.domain.errors import ForbiddenUserError, IncorrectPasswordError, UnknownUserError
from pai.store import tokens, users
from pai.store.credentials import token_digest
from pai.store.db import Database
from pai.store.records import Caller, User

CACHE_SIZE = 10_000


class Accounts:
    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self.db = db
        self.clock = clock
        self._lock = threading.Lock()  # readers resolve tokens from several threads
        self._cache: OrderedDict[str, Caller] = OrderedDict()
        self._generation = 0  # bumped by invalidate: a lookup that raced with it is not cached
        self.on_invalidate: Callable[[], None] | None = None  # called after each invalidate

    def login(self, name: str, password: str, expiration: int) -> tuple[str, User]:
        """A new token for ``name``, valid ``expiration`` seconds, when ``password`` is theirs. OpenPAI's errors:
        UnknownUserError (400 NoUserError), IncorrectPasswordError."""
        with self.db.session() as s:
            if users.get_user(s, name) is None:
                raise UnknownUserError(f"User {name} is not found.")
            user = users.verify_password(s, name, password)
            if user is None:
                raise IncorrectPasswordError("Password is incorrect.")
            return tokens.issue_token(s, user.name, expiration, now=self.clock()), user

    def application_token(self, caller: Caller) -> str:
        """A token that never expires, for a program acting as ``caller``'s user (OpenPAI's application token)."""
        with self.db.session() as s:
            return tokens.issue_token(s, caller.user.name, None, now=self.clock(), application=True)

    def tokens_of(self, user: User) -> list[str]:
        """References to the user's live tokens (``tokens.token_reference``; a token itself is never kept)."""
        with self.db.session() as s:
            return [tokens.token_reference(d) for d in tokens.tokens_of(s, user.name, self.clock())]

    def revoke(self, caller: Caller, token_or_reference: str) -> bool:
        """Revoke one of the caller's tokens, named by itself or by its reference; False when there is none such
        (OpenPAI answers that as done too). ForbiddenUserError when it is another user's."""
        with self.db.session() as s:
            digest = token_digest(token_or_reference)
            owner = tokens.lookup(s, digest)
            if owner is None:  # a reference names one of the caller's own tokens, or none
                mine = tokens.tokens_of(s, caller.user.name, self.clock())
                digest, owner = next(((d, c) for d, c in mine.items()
                                      if tokens.token_reference(d) == token_or_reference), (digest, None))
            if owner is None:  # none of the caller's: another user's reference is refused, as their token is
                other = tokens.owner_by_reference(s, token_or_reference)
                if other is not None and other != caller.user.name:
                    raise ForbiddenUserError(f"User {caller.user.name} is not allowed to do this operation.")
                return False
            if owner.user.name != caller.user.name:
                raise ForbiddenUserError(f"User {caller.user.name} is not allowed to do this operation.")
            tokens.revoke_digest(s, digest)
        self.invalidate()
        return True

    def ensure_admin(self, name: str, password: str) -> None:
        """Create ``name`` as an admin when absent (the master's first start); an existing user is kept."""
        with self.db.session() as s:
            users.ensure_admin(s, name, password)
        self.invalidate()

    def cached_caller(self, token: str) -> tuple[bool, Caller | None]:
        """``(True, who the token speaks for, or None)`` when the cache knows the token; ``(False, None)`` when only
        the store can tell (``caller_of``). Touches no database: the event loop asks this first and saves a thread
        hop."""
        hit, _ = self._cached(token_digest(token))
        return (False, None) if hit is None else (True, self._valid(hit))

    def caller_of(self, token: str) -> Caller | None:
        """Who the token speaks for while it is valid (read-only: runs on a reader thread)."""
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

    def user_of(self, token: str) -> User | None:
        caller = self.caller_of(token)
        return None if caller is None else caller.user

    def _cached(self, digest: str) -> tuple[Caller | None, int]:
        with self._lock:
            hit = self._cache.get(digest)
            if hit is not None:
                self._cache.move_to_end(digest)
            return hit, self._generation

    def _valid(self, caller: Caller) -> Caller | None:
        return caller if caller.valid_at(self.clock()) else None

    @property
    def generation(self) -> int:
        """How many times the cache was forgotten: a change to users or tokens changes it."""
        with self._lock:
            return self._generation

    def invalidate(self) -> None:
        """Forget every cached token: call after any change to users or tokens."""
        with self._lock:
            self._cache.clear()
            self._generation += 1
        if self.on_invalidate is not None:
            self.on_invalidate()
