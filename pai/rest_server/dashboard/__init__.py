"""The web dashboard: plain HTML, CSS and JavaScript modules (``static/``, package data; no build step, no library),
served by the master at ``/`` (the page) and ``/dashboard/<file>`` (its modules and style sheet).

The files are read once, on first use, and kept in memory with a digest: every answer carries an ``ETag`` and
``Cache-Control: no-cache``, so a browser asks again each load and gets a 304 while nothing changed (a new version
of the master is seen at once). The page talks to the REST API with the user's token (``Authorization: Bearer``),
like any other client; a strict Content-Security-Policy lets it load nothing but its own files.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from aiohttp import web

CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
SECURITY = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


@cache
def assets() -> dict[str, Asset]:
    """Every file of ``static/`` by name."""
    found: dict[str, Asset] = {}
    for entry in resources.files(__name__).joinpath("static").iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in CONTENT_TYPES:
            body = entry.read_bytes()
            found[entry.name] = Asset(body, CONTENT_TYPES[suffix], '"' + hashlib.sha256(body).hexdigest()[:20] + '"')
    return found


def _answer(request: web.Request, name: str) -> web.Response:
    asset = assets().get(name)
    if asset is None:
        raise web.HTTPNotFound()
    headers = {"ETag": asset.etag, "Cache-Control": "no-cache", **SECURITY}
    if request.headers.get("If-None-Match") == asset.etag:
        return web.Response(status=304, headers=headers)
    return web.Response(body=asset.body, content_type=asset.content_type, charset="utf-8", headers=headers)


async def index(request: web.Request) -> web.Response:
    """``GET /``: the dashboard's one page (its routes are in the URL's fragment: ``/#/jobs``)."""
    return _answer(request, "index.html")


async def asset(request: web.Request) -> web.Response:
    """``GET /dashboard/{file}``: a module, the style sheet or an icon."""
    return _answer(request, request.match_info["file"])
