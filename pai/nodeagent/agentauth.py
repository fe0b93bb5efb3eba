"""The agent's HTTP door: only the master comes in, with the agent token (``Authorization: Bearer <token>``), which
the master and its agents share; refusals are ``{code, message}`` as the master's."""

from __future__ import annotations

import hmac

from aiohttp import web

from pai.domain.errors import PaiError

TOKEN = web.AppKey("token", str)  # "" only for an agent that has none (the master refuses such an agent)


def authorised(request: web.Request) -> bool:
    expected = request.app[TOKEN]
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if not expected:
        return True
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode())


def error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message}, status=status)


def refuse(e: PaiError) -> web.Response:
    return error(e.status, e.code, e.message)
