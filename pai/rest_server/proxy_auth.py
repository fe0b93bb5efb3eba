"""Who a proxied request is: ``Authorization: Bearer`` (or Basic, as everywhere), else the ``pai_proxy`` cookie that
``POST /api/v2/proxy/session`` gives a browser (which sends no header of its own to a page's links, images and
WebSockets).

The cookie is not the token itself: it is the token sealed with the master's secret key (Fernet: encrypted and
authenticated, ``pai.store.keyring``), so that every master and API worker of the cluster opens it, nobody can forge
or read one, and it is worth no more than the token: revoking the token, or its expiry, ends it too. It is
``HttpOnly`` (no page's script reads it), ``SameSite=Lax`` (another site's page sends it only when it links here)
and ``Path=/proxy/``: the API never reads it.
"""

from __future__ import annotations

import time

from aiohttp import web

from pai.domain.errors import UnauthorizedUserError
from pai.rest_server.keys import DB, SERVICE
from pai.rest_server.service import Context, Credentials, credentials, reads
from pai.store.keyring import SecretKeyError
from pai.store.records import Caller

COOKIE = "pai_proxy"
COOKIE_PATH = "/proxy/"
_PURPOSE = b"pai-proxy-session:"  # what a sealed cookie holds before the token: no other sealed value passes


def _seal(request: web.Request, token: str) -> str:
    keyring = request.app[DB].keyring
    assert keyring is not None, "the master's secret key is loaded at start"
    return keyring.seal(_PURPOSE + token.encode())


def _unseal(request: web.Request, cookie: str) -> str | None:
    keyring = request.app[DB].keyring
    try:
        opened = keyring.open(cookie) if keyring is not None else b""
    except (SecretKeyError, UnicodeError, ValueError):
        return None
    if not opened.startswith(_PURPOSE):
        return None
    return opened.removeprefix(_PURPOSE).decode("utf-8", errors="replace")


def proxy_credentials(request: web.Request) -> Credentials:
    """The credentials of a proxied request: pai's Authorization header (Bearer or Basic), else the ``pai_proxy``
    cookie; 401 without either (an ``Authorization`` of another scheme is the proxied app's own: the cookie rules)."""
    scheme = request.headers.get("Authorization", "").partition(" ")[0].lower()
    if scheme in ("bearer", "basic"):
        return credentials(request)
    cookie = request.cookies.get(COOKIE)
    if cookie:
        token = _unseal(request, cookie)
        if token is None:
            raise UnauthorizedUserError(f"the {COOKIE} cookie is not one this cluster gave; sign in again")
        return Credentials(token)
    raise UnauthorizedUserError("a task's port is reached with 'Authorization: Bearer <token>', or in a browser with "
                                f"the {COOKIE} cookie that POST /api/v2/proxy/session sets (the dashboard's links "
                                "do it for you)")


@reads
def _caller(c: Context) -> Caller:
    assert c.caller is not None
    return c.caller


async def open_session(request: web.Request) -> web.Response:
    """``POST /api/v2/proxy/session`` (Bearer): sets the ``pai_proxy`` cookie for ``/proxy/`` in this browser, good
    as long as the token is."""
    creds = credentials(request)
    caller = await request.app[SERVICE](creds, _caller)
    resp = web.json_response({"message": f"proxy session opened for user {caller.user.name}", "path": COOKIE_PATH,
                              "user": caller.user.name, "expiresAt": caller.expires_at and int(caller.expires_at)})
    max_age = None if caller.expires_at is None else max(int(caller.expires_at - time.time()), 0)
    resp.set_cookie(COOKIE, _seal(request, creds.token), path=COOKIE_PATH, httponly=True, samesite="Lax",
                    secure=request.secure, max_age=max_age)
    return resp


async def close_session(request: web.Request) -> web.Response:
    """``DELETE /api/v2/proxy/session``: clears the cookie (the token itself stays valid: log out to end it)."""
    resp = web.json_response({"message": "proxy session closed", "path": COOKIE_PATH})
    resp.del_cookie(COOKIE, path=COOKIE_PATH)
    return resp
