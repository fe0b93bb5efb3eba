"""Logging in and out, and OpenPAI's token API (``/api/v2/tokens``; ``/api/v1/token`` for v0.14 clients).

OpenPAI's clients post forms here (the JS SDK and the VS Code extension log in with
``application/x-www-form-urlencoded``), so every body is read as JSON or as a form (``bodies.fields``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.errors import InvalidParametersError
from pai.domain.limits import INT32_MAX
from pai.rest_server.bodies import fields
from pai.rest_server.keys import CONFIG, SERVICE
from pai.rest_server.service import Context, Op, anonymous, credentials, reads, writes
from pai.store.records import User

LOGIN_PATH = "/api/v1/authn/basic/login"  # where OpenPAI's authn info sends a client (v1 and v2 alike)


def _expiration(body: dict[str, Any], default: int) -> int:
    """Seconds the token lives: a number (JSON) or digits (a form); at most INT32_MAX."""
    raw = body.get("expiration", default)
    value = int(raw) if isinstance(raw, str) and raw.strip().isdigit() else raw
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= INT32_MAX:
        raise InvalidParametersError(
            f"expiration: must be a positive number of seconds, at most {INT32_MAX}", field="expiration"
        )
    return value


def _text(body: dict[str, Any], field: str) -> str:
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise InvalidParametersError(f"{field}: a non-empty string is required", field=field)
    return value


@anonymous(writes=True)
def _login(c: Context, name: str, password: str, expiration: int) -> tuple[str, User]:
    return c.launcher.accounts.login(name, password, expiration)


@writes(person=True)
def _logout(c: Context) -> None:
    assert c.caller is not None and c.credentials is not None
    c.launcher.accounts.revoke(c.caller, c.credentials.token)


def _tokens_of(c: Context) -> list[str]:
    return c.launcher.accounts.tokens_of(c.user)


_tokens = Op(_tokens_of, writes=False, person=True)  # a read that needs a person (``reads`` takes no ``person``)


@writes(person=True)
def _application_token(c: Context) -> str:
    assert c.caller is not None
    return c.launcher.accounts.application_token(c.caller)


@writes(person=True)
def _revoke(c: Context, token_or_reference: str) -> None:
    assert c.caller is not None
    c.launcher.accounts.revoke(c.caller, token_or_reference)


@reads
def _check(c: Context) -> dict[str, Any]:
    caller = c.caller
    assert caller is not None
    body: dict[str, Any] = {"username": caller.user.name, "application": caller.application,
                            "admin": caller.user.admin, "iat": int(caller.created_at)}
    if caller.expires_at is not None:
        body["exp"] = int(caller.expires_at)
    return body


async def login(request: web.Request) -> web.Response:
    """``POST /api/v{1,2}/authn/basic/login``, ``POST /api/v1/token``, ``POST /api/v2/tokens``: a new token."""
    body = await fields(request, 'like {"username": "...", "password": "..."}')
    name, password = _text(body, "username"), _text(body, "password")
    expiration = _expiration(body, request.app[CONFIG].token_ttl_seconds)
    token, user = await request.app[SERVICE](None, _login, name, password, expiration)
    return web.json_response({"token": token, "user": user.name, "admin": user.admin})


async def logout(request: web.Request) -> web.Response:
    """``DELETE /api/v{1,2}/authn/basic/logout``: the token presented stops working at once."""
    await request.app[SERVICE](credentials(request), _logout)
    return web.json_response({"message": "Logout successfully"})


async def authn_info(request: web.Request) -> web.Response:
    """``GET /api/v{1,2}/authn/info``: how to log in (OpenPAI's keys)."""
    return web.json_response({"authn_type": "basic", "loginURI": LOGIN_PATH, "loginURIMethod": "post"})


async def list_tokens(request: web.Request) -> web.Response:
    """``GET /api/v2/tokens``: the caller's live tokens, by reference (the master keeps no token in clear)."""
    refs = await request.app[SERVICE](credentials(request), _tokens)
    return web.json_response({"tokens": refs})


async def application_token(request: web.Request) -> web.Response:
    """``POST /api/v2/tokens/application``: a token that never expires, for a program acting as the caller."""
    token = await request.app[SERVICE](credentials(request), _application_token)
    return web.json_response({"token": token, "application": True})


async def revoke_token(request: web.Request) -> web.Response:
    """``DELETE /api/v2/tokens/{token}``: the token (or its reference) of the caller's stops working at once; one
    that does not exist is answered as done, as OpenPAI does."""
    await request.app[SERVICE](credentials(request), _revoke, request.match_info["token"])
    return web.json_response({"message": "revoke successfully"})


async def check_token(request: web.Request) -> web.Response:
    """``GET /api/v2/tokens/check``: who the presented token speaks for (application tokens may ask too)."""
    return web.json_response(await request.app[SERVICE](credentials(request), _check))
