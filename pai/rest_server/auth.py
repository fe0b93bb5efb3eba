"""Who is calling, and may they: OpenPAI's ``Authorization: Bearer <token>``, and ``Basic`` with an application
token (``base64(username:token)``), as OpenPAI's middleware accepts."""

from __future__ import annotations

import base64
import binascii
import hmac

from aiohttp import web

from pai.domain.errors import ForbiddenUserError, UnauthorizedUserError
from pai.rest_server.keys import AGENT_TOKEN, LAUNCHER, STORE
from pai.store.records import Caller, User

_CALLER = web.RequestKey("caller", Caller)  # the request's caller, once looked up


def _credentials(request: web.Request) -> tuple[str, str | None]:
    """The token, and for ``Basic`` the user name it must belong to."""
    header = request.headers.get("Authorization", "")
    scheme, _, rest = header.partition(" ")
    if scheme.lower() == "bearer" and rest.strip():
        return rest.strip(), None
    if scheme.lower() == "basic" and rest.strip():
        try:
            name, colon, token = base64.b64decode(rest.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            name, colon, token = "", "", ""
        if not colon or not name or not token:
            raise UnauthorizedUserError("Authorization: Basic must carry base64 of 'username:application token'")
        return token, name
    raise UnauthorizedUserError("Authorization: a 'Bearer <token>' header is required; log in first")


def presented_token(request: web.Request) -> str:
    return _credentials(request)[0]


async def current_caller(request: web.Request) -> Caller:
    """Who the request's token speaks for; 401 UnauthorizedUserError when nobody (no token, unknown, expired or
    revoked, or ``Basic`` with a token that is not that user's application token)."""
    if _CALLER in request:
        return request[_CALLER]
    token, basic_user = _credentials(request)
    caller = await request.app[STORE].read(request.app[LAUNCHER].accounts.caller_of, token)  # the generation read
    if caller is None:
        raise UnauthorizedUserError("the token is invalid or has expired; log in again")
    if basic_user is not None and (basic_user != caller.user.name or not caller.application):
        raise UnauthorizedUserError("Authorization: Basic takes a user's own application token")
    request[_CALLER] = caller
    return caller


async def current_user(request: web.Request) -> User:
    return (await current_caller(request)).user


async def person(request: web.Request) -> Caller:
    """The caller, who must be a person logged in, not a program with an application token (OpenPAI lets those
    neither manage tokens nor log out)."""
    caller = await current_caller(request)
    if caller.application:
        raise ForbiddenUserError("Applications are not allowed to do this operation.")
    return caller


def check_agent(request: web.Request) -> None:
    """Internal endpoints: agents must present the master's agent token (there always is one)."""
    token, basic_user = _credentials(request)
    if basic_user is not None or not hmac.compare_digest(token.encode(), request.app[AGENT_TOKEN].encode()):
        raise UnauthorizedUserError("the agent token is not valid")
