"""The agent's log server: ``GET /logs/{attempt_id}/{stdout|stderr}[?tail=<bytes>]`` as text/plain; with
``follow=1`` the log as it is written until the attempt ends (``pai.nodeagent.logfollow``).

The master reads attempt logs from here and serves them to the users it authorised; they stay on the node
after the attempt ends. Only the master may read: a request must carry the agent token (``Authorization:
Bearer <token>``), which the master and its agents share. ``X-Log-Size`` carries the size of what the node
keeps of the log, so that a reader can poll for growth; ``X-Log-Dropped`` what the node's size cap dropped
(``pai.nodeagent.logcap``). A read without ``tail`` serves all that is kept.

``GET /metrics`` is the node's Prometheus metrics (``pai.nodeagent.metrics``), without a token, as node-exporter.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from pai.nodeagent import logcap
from pai.nodeagent.logfollow import Running, follow, start_offset
from pai.nodeagent.paths import AgentPaths, LogStream, is_attempt_id
from pai.protocol.door import DOOR_LOGGER

TEXT = "text/plain; charset=utf-8"
_PATHS = web.AppKey("paths", AgentPaths)
_TOKEN = web.AppKey("token", str)
_RUNNING: web.AppKey[Running] = web.AppKey("running")
_CLOSING = web.AppKey("closing", asyncio.Event)  # set on shutdown: followers stop
Render = Callable[[], Awaitable[bytes]]
_METRICS: web.AppKey[Render] = web.AppKey("metrics")


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message}, status=status)


def _authorised(request: web.Request) -> bool:
    expected = request.app[_TOKEN]
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if not expected:
        return True
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode())


async def _get_log(request: web.Request) -> web.StreamResponse:
    if not _authorised(request):
        return _error(401, "UnauthorizedUserError", "logs are served to the master only: read them through its API")
    attempt_id = request.match_info["attempt_id"]
    stream = LogStream(request.match_info["stream"])
    if not is_attempt_id(attempt_id):
        return _error(400, "InvalidParametersError", "the attempt id is not a plain token")
    paths = request.app[_PATHS]
    if not paths.attempt(attempt_id).is_dir():
        return _error(404, "NoTaskError", f"attempt {attempt_id} is not on this node")
    path = paths.log_file(attempt_id, stream)
    size = logcap.size(path)
    headers = {"X-Log-Size": str(size), "X-Log-Dropped": str(logcap.dropped(path)), "Content-Type": TEXT}
    numbers: dict[str, int | None] = {}
    for name in ("tail", "offset"):
        raw = request.query.get(name)
        if raw is not None and not (raw.isascii() and raw.isdigit()):
            return _error(400, "InvalidParametersError", f"{name} must be a number of bytes")
        numbers[name] = None if raw is None else int(raw)
    tail = numbers["tail"]
    if request.query.get("follow") in ("1", "true"):
        offset = await asyncio.to_thread(start_offset, path, numbers["offset"], tail)
        return await follow(request, attempt_id, path, request.app[_RUNNING], offset, headers, request.app[_CLOSING])
    body = logcap.tail(path, size if tail is None else tail) if size else b""
    return web.Response(body=body, headers=headers)


async def _get_metrics(request: web.Request) -> web.Response:
    return web.Response(body=await request.app[_METRICS](), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _close_followers(app: web.Application) -> None:
    app[_CLOSING].set()


def _never(attempt_id: str) -> bool:
    return False


def make_app(paths: AgentPaths, token: str | None = None, metrics: Render | None = None,
             running: Running = _never) -> web.Application:
    """``token``: the agent token the master presents; None only for an agent that has none (the master
    refuses such an agent, so it runs nothing). ``metrics``: renders ``/metrics``. ``running``: whether an
    attempt still runs on this node (a followed log ends once it does not)."""
    app = web.Application(handler_args={"logger": DOOR_LOGGER})  # one line per malformed request (pai.protocol.door)
    app[_PATHS] = paths
    app[_TOKEN] = token or ""
    app[_RUNNING] = running
    app[_CLOSING] = asyncio.Event()
    app.on_shutdown.append(_close_followers)
    app.router.add_get("/logs/{attempt_id}/{stream:stdout|stderr}", _get_log)
    if metrics is not None:
        app[_METRICS] = metrics
        app.router.add_get("/metrics", _get_metrics)
    return app


class LogServer:
    def __init__(self, paths: AgentPaths, host: str, port: int = 0, token: str | None = None,
                 metrics: Render | None = None, running: Running = _never) -> None:
        self._runner = web.AppRunner(make_app(paths, token, metrics, running), access_log=None)
        self._host = host
        self._port = port
        self.port = port

    async def start(self) -> int:
        """Listen; returns the port (the one picked when 0 was asked for)."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def close(self) -> None:
        await self._runner.cleanup()
