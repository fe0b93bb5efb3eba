"""Logging in and out, and OpenPAI's token API (``/api/v2/tokens``; ``/api/v1/token`` for v0.14 clients).

OpenPAI's clients post forms here (the JS SDK and the VS Code extension log in with
``application/x-www-form-urlencoded``), so every body is read as JSON or as a form (``bodies.fields``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.errors import InvalidParametersError
from pai.domain.limits import INT32_MAX
from pai.rest_server.auth import current_caller, person, presented_token
from pai.rest_server.bodies import fields
from pai.rest_server.keys import CONFIG, LAUNCHER, STORE

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


async def login(request: web.Request) -> web.Response:
    """``POST /api/v{1,2}/authn/basic/login``, ``POST /api/v1/token``, ``POST /api/v2/tokens``: a new token."""
    body = await fields(request, 'like {"username": "...", "password": "..."}')
    name, password = _text(body, "username"), _text(body, "password")
    expiration = _expiration(body, request.app[CONFIG].token_ttl_seconds)
    token, user = await request.app[STORE].call(request.app[LAUNCHER].accounts.login, name, password, expiration)
    return web.json_response({"token": token, "user": user.name, "admin": user.admin})


async def logout(request: web.Request) -> web.Response:
    """``DELETE /api/v{1,2}/authn/basic/logout``: the token presented stops working at once."""
    caller = await person(request)
    await request.app[STORE].call(request.app[LAUNCHER].accounts.revoke, caller, presented_token(request))
    return web.json_response({"message": "Logout successfully"})


async def authn_info(request: web.Request) -> web.Response:
    """``GET /api/v{1,2}/authn/info``: how to log in (OpenPAI's keys)."""
    return web.json_response({"authn_type": "basic", "loginURI": LOGIN_PATH, "loginURIMethod": "post"})


async def list_tokens(request: web.Request) -> web.Response:
    """``GET /api/v2/tokens``: the caller's live tokens, by reference (the master keeps no token in clear)."""
    caller = await person(request)
    refs = await request.app[STORE].read(request.app[LAUNCHER].accounts.tokens_of, caller.user)
    return web.json_response({"tokens": refs})


async def application_token(request: web.Request) -> web.Response:
    """``POST /api/v2/tokens/application``: a token that never expires, for a program acting as the caller."""
    caller = await person(request)
    token = await request.app[STORE].call(request.app[LAUNCHER].accounts.application_token, caller)
    return web.json_response({"token": token, "application": True})


async def revoke_token(request: web.Request) -> web.Response:
    """``DELETE /api/v2/tokens/{token}``: the token (or its reference) of the caller's stops working at once; one
    that does not exist is answered as done, as OpenPAI does."""
    caller = await person(request)
    await request.app[STORE].call(request.app[LAUNCHER].accounts.revoke, caller, request.match_info["token"])
    return web.json_response({"message": "revoke successfully"})


async def check_token(request: web.Request) -> web.Response:
    """``GET /api/v2/tokens/check``: who the presented token speaks for (application tokens may ask too)."""
    caller = await current_caller(request)
    body: dict[str, Any] = {"username": caller.user.name, "application": caller.application,
                            "admin": caller.user.admin, "iat": int(caller.created_at)}
    if caller.expires_at is not None:
        body["exp"] = int(caller.expires_at)
    return web.json_response(body)
