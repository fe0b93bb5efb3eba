"""The application's async service facade: a request is one call, ``await service(credentials, op, *args)``.

An operation (``op``) is a plain function of a ``Context`` (the caller, as the token said in this very transaction,
and the launcher's parts) and its arguments, declared with what it does: ``@reads``, ``@writes``, and whether it
needs a person (``person=True``: not an application token) or nobody (``anonymous``). The facade runs it in one
transaction (``Database.unit``: every session it opens joins it) with the caller's check inside, on the thread its
kind needs (writes on the store's writer thread: SQLite has one writer; reads on the reader threads), and after a
write the launcher acts on (``wakes=True``) wakes the launcher in this process (elsewhere the database tells it:
NOTIFY). So no handler picks a thread, opens a session or checks a token; a refused request changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from aiohttp import web
from sqlalchemy.orm import Session

from pai.domain.errors import ForbiddenUserError, UnauthorizedUserError
from pai.launcher.service import Launcher
from pai.launcher.storethread import StoreThread
from pai.launcher.vcadmin import VcAdmin
from pai.store.db import Database
from pai.store.records import Caller, User

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Credentials:
    """What the request presented: OpenPAI's ``Authorization: Bearer <token>``, or ``Basic`` with an application
    token (``base64(username:token)``, ``basic_user`` the name), as OpenPAI's middleware accepts."""

    token: str
    basic_user: str | None = None


def credentials(request: web.Request) -> Credentials:
    """The request's credentials; 401 UnauthorizedUserError when it presents none (or a malformed Basic one)."""
    scheme, _, rest = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and rest.strip():
        return Credentials(rest.strip())
    if scheme.lower() == "basic" and rest.strip():
        try:
            name, colon, token = base64.b64decode(rest.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            name, colon, token = "", "", ""
        if not colon or not name or not token:
            raise UnauthorizedUserError("Authorization: Basic must carry base64 of 'username:application token'")
        return Credentials(token, name)
    raise UnauthorizedUserError("Authorization: a 'Bearer <token>' header is required; log in first")


@dataclass(frozen=True, slots=True)
class Context:
    """What an operation reaches: the caller (None for an anonymous one) and the application's parts."""

    caller: Caller | None
    launcher: Launcher
    vcadmin: VcAdmin
    credentials: Credentials | None = None

    @property
    def db(self) -> Database:
        return self.launcher.db

    @property
    def user(self) -> User:
        assert self.caller is not None, "an anonymous operation has no user"
        return self.caller.user


@dataclass(frozen=True, slots=True)
class Op(Generic[P, T]):
    """An operation and what it needs: ``writes`` (else it only reads), a ``person`` (not an application token), or
    nobody (``anonymous``)."""

    fn: Callable[Concatenate[Context, P], T]
    writes: bool
    person: bool = False
    anonymous: bool = False
    wakes: bool = False  # the launcher acts on it (a job or a node changed): wake it once committed

    def __call__(self, context: Context, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.fn(context, *args, **kwargs)


def reads(fn: Callable[Concatenate[Context, P], T]) -> Op[P, T]:
    return Op(fn, writes=False)


def writes(*, person: bool = False, wakes: bool = False) -> Callable[[Callable[Concatenate[Context, P], T]],
                                                                      Op[P, T]]:
    """A write; ``wakes``: one the launcher acts on (a submission, a stop, a node's state, a VC)."""
    return lambda fn: Op(fn, writes=True, person=person, wakes=wakes)


def anonymous(*, writes: bool) -> Callable[[Callable[Concatenate[Context, P], T]], Op[P, T]]:
    """An operation anybody may ask for (a login: the password is its check)."""
    return lambda fn: Op(fn, writes=writes, anonymous=True)


class Service:
    """``await service(credentials, op, *args)``: the one way a request reaches the store."""

    def __init__(self, launcher: Launcher, vcadmin: VcAdmin, store: StoreThread,
                 wake: Callable[[], None] = lambda: None) -> None:
        self.launcher, self.vcadmin, self.store, self.wake = launcher, vcadmin, store, wake

    async def __call__(self, creds: Credentials | None, op: Op[P, T], *args: Any) -> T:
        run = functools.partial(self._unit, creds, op, args)
        if not op.writes:
            return await self.store.read(run)
        result = await self.store.call(run)
        if op.wakes:
            self.wake()
        return result

    def _unit(self, creds: Credentials | None, op: Op[P, T], args: tuple[Any, ...]) -> T:
        with self.launcher.db.unit(read_only=not op.writes) as s:
            caller = None if op.anonymous else self._caller(s, creds, person=op.person)
            fn: Callable[..., T] = op.fn
            return fn(Context(caller, self.launcher, self.vcadmin, creds), *args)

    def _caller(self, s: Session, creds: Credentials | None, *, person: bool) -> Caller:
        """Who the credentials speak for, in the unit's transaction: 401 UnauthorizedUserError when nobody (none,
        unknown, expired or revoked, or Basic with a token that is not that user's application token); 403
        ForbiddenUserError for an application token where a person is needed (OpenPAI lets those neither manage
        tokens nor log out)."""
        if creds is None:
            raise UnauthorizedUserError("Authorization: a 'Bearer <token>' header is required; log in first")
        caller = self.launcher.accounts.caller(s, creds.token)  # in the unit's own session: no SAVEPOINT
        if caller is None:
            raise UnauthorizedUserError("the token is invalid or has expired; log in again")
        if creds.basic_user is not None and (creds.basic_user != caller.user.name or not caller.application):
            raise UnauthorizedUserError("Authorization: Basic takes a user's own application token")
        if person and caller.application:
            raise ForbiddenUserError("Applications are not allowed to do this operation.")
        return caller
