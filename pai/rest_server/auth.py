"""Bearer-token authentication: who is calling, and may they."""

from __future__ import annotations

import hmac

from aiohttp import web

from pai.domain.errors import UnauthorizedUserError
from pai.rest_server.keys import AGENT_TOKEN, LAUNCHER, STORE
from pai.store.records import User


def _bearer(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedUserError("Authorization: a 'Bearer <token>' header is required; log in first")
    return token.strip()


async def current_user(request: web.Request) -> User:
    token = _bearer(request)
    accounts = request.app[LAUNCHER].accounts
    known, user = accounts.cached_user(token)  # most requests: answered here, with no hop to a reader thread
    if not known:
        user = await request.app[STORE].read(accounts.user_of, token)
    if user is None:
        raise UnauthorizedUserError("the token is invalid or has expired; log in again")
    return user


def check_agent(request: web.Request) -> None:
    """Internal endpoints: agents must present the master's agent token (there always is one)."""
    if not hmac.compare_digest(_bearer(request).encode(), request.app[AGENT_TOKEN].encode()):
        raise UnauthorizedUserError("the agent token is not valid")
