"""Logins and tokens: the one door for who is calling.

Resolving a token is on every request's path, so known tokens are cached in memory (by digest, with their
user and expiry; at most ``CACHE_SIZE``). Several processes, of several masters, keep such a cache of one
database: every write that changes users, tokens or groups bumps the "accounts" generation in its transaction
(``pai.store.generations``), and ``caller`` reads the generation in the lookup's transaction and uses the cache
only if its entries were read at that generation. So a token revoked or an admin demoted through any process is
refused on the next request to every process, not after a delay.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.orm import Session

from pai.domain.errors import ForbiddenUserError, IncorrectPasswordError, UnknownUserError
from pai.store import generations, tokens, users
from pai.store.credentials import token_digest
from pai.store.db import Database
from pai.store.records import Caller, User

CACHE_SIZE = 10_000
V = TypeVar("V")


class Accounts:
    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self.db = db
        self.clock = clock
        self._lock = threading.Lock()  # readers resolve tokens from several threads
        self._cache: OrderedDict[str, Caller] = OrderedDict()
        self._generation = 0  # bumped by invalidate: a lookup that raced with it is not cached
        self._seen: int | None = None  # the database's "accounts" generation the cached entries were read at
        self._users: OrderedDict[str, User | None] = OrderedDict()  # ``user``'s, by name (None: no such user)
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
            generations.bump(s, generations.ACCOUNTS)
        self.invalidate()
        return True

    def ensure_admin(self, name: str, password: str) -> None:
        """Create ``name`` as an admin when absent (the master's first start); an existing user is kept."""
        with self.db.session() as s:
            users.ensure_admin(s, name, password)
            generations.bump(s, generations.ACCOUNTS)
        self.invalidate()

    def caller(self, s: Session, token: str) -> Caller | None:
        """Who the token speaks for while it is valid, in ``s``'s transaction (a request's own): one read of the
        generation, and the token's rows only when the cache does not hold it at that generation."""
        digest = token_digest(token)
        seen = generations.value(s, generations.ACCOUNTS)
        with self._lock:
            self._at(seen)
            hit = self._cache.get(digest)
            if hit is not None:
                self._cache.move_to_end(digest)
            local = self._generation
        if hit is not None:
            return self._valid(hit)
        found = tokens.lookup(s, digest)
        if found is None:
            return None
        with self._lock:  # kept only if read at what the cache holds now, and no write of this process came between
            if self._seen == seen and self._generation == local:
                _keep(self._cache, digest, found)
        return self._valid(found)

    def user(self, s: Session, name: str) -> User | None:
        """The user ``name`` (their groups, admin flag and what they grant) as the database has it now, in ``s``'s
        transaction; None when there is none. Cached as tokens are: one read of the generation, and the user's rows
        only when the cache does not hold them at that generation (an experiment's every trial is its owner's job)."""
        seen = generations.value(s, generations.ACCOUNTS)
        with self._lock:
            self._at(seen)
            if name in self._users:
                self._users.move_to_end(name)
                return self._users[name]
            local = self._generation
        found = users.get_user(s, name)
        with self._lock:
            if self._seen == seen and self._generation == local:
                _keep(self._users, name, found)
        return found

    def _at(self, seen: int) -> None:
        """Under the lock: the cache for the generation ``seen`` (a write committed, or this transaction began before
        one: start over)."""
        if self._seen != seen:
            self._cache.clear()
            self._users.clear()
            self._seen = seen

    def caller_of(self, token: str) -> Caller | None:
        """``caller`` in a transaction of its own (read-only: runs on a reader thread)."""
        with self.db.session() as s:
            return self.caller(s, token)

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
        """How many times this process forgot its cache (``invalidate``): a change to users or tokens made here
        changes it."""
        with self._lock:
            return self._generation

    def invalidate(self) -> None:
        """Forget every cached token and user: call after any change to users or tokens."""
        with self._lock:
            self._cache.clear()
            self._users.clear()
            self._generation += 1
        if self.on_invalidate is not None:
            self.on_invalidate()


def _keep(cache: OrderedDict[str, V], key: str, value: V) -> None:
    """``value`` cached under ``key``, the least recently used entries dropped past ``CACHE_SIZE``."""
    cache[key] = value
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)
