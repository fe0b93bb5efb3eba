"""The read front: the master's public address, served by a process of its own.

Every thread of a process shares one interpreter lock. During a burst of submissions the master's writer thread
(parsing, storing and scheduling every job) holds it most of the time, so a read on one of the master's reader
threads waits for it at every step: a short page of the job list took several times its idle time at p99
(bench/api_lists.py; the figures: docs/architecture.md), and neither giving reads priority on the writer thread nor
running the burst's clients at a lower CPU priority closed that gap. A process has its own lock.

So ``pai master`` runs the master behind a front (unless ``--no-front``): the front listens on the public address
and answers the reads that users and the dashboard poll (the routes marked ``FRONT`` in the route table: job
lists and a job's detail and config) itself, with the master's own handlers, on its own reader threads, list
processes and connections to the store. A request that writes (submissions, stops, logins, the agents'
heartbeats) or opens a WebSocket (the agents' channels) is handed to the master with its connection
(``pai.rest_server.handoff``): the master serves that connection from then on, so the front's event loop stays
free for the reads. Every other request (the other reads, ``/metrics``, one that cannot be handed over) passes
through to the master on a Unix socket in the data directory, as it came, with the caller's address in
``X-Forwarded-For``, and its answer is streamed back.

What the front caches (users and tokens, the cluster configuration for ``jobsReadableByAll``) the master caches
too, and forgets whenever it changes; the front follows the master's generations of both (``handoff``) before
every request, so a revoked token is refused on the next request, as by the master alone, while the submissions
and heartbeats in their thousands leave the caches warm.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from aiohttp import (
    ClientError,
    ClientSession,
    ClientTimeout,
    ClientWebSocketResponse,
    UnixConnector,
    WSCloseCode,
    WSMsgType,
    WSServerHandshakeError,
    web,
)
from aiohttp.typedefs import Handler
from multidict import CIMultiDict, CIMultiDictProxy
from prometheus_client import generate_latest

from pai.domain.errors import PaiError
from pai.launcher.loop import StoreThread
from pai.launcher.service import Launcher
from pai.protocol.door import DOOR_LOGGER
from pai.rest_server.channel import PING_SECONDS
from pai.rest_server.config import MasterConfig
from pai.rest_server.errors import PARSER_LINE_LIMIT, REQUEST_ID, REQUEST_ID_HEADER, add_request_id, error_middleware
from pai.rest_server.handoff import FrontLink
from pai.rest_server.heap import freeze_heap
from pai.rest_server.keys import CONFIG, DB, LAUNCHER, LISTS, STORE
from pai.rest_server.listing import Lists
from pai.rest_server.metrics import merged_metrics, timing_middleware
from pai.rest_server.routes import served_by_front
from pai.store.db import Database

log = logging.getLogger("pai.master.front")
Socket = web.WebSocketResponse | ClientWebSocketResponse

MASTER = web.AppKey("master", ClientSession)  # requests to the master, over its Unix socket
SOCKETS = web.AppKey("sockets", set[web.WebSocketResponse])  # the WebSockets open through the front
MASTER_SOCKET = "master.sock"  # in the data directory
UPSTREAM = "http://master"  # the host part is not used on a Unix socket
READS = frozenset({"GET", "HEAD", "OPTIONS"})
# Headers that describe one hop, not the message (RFC 9110 section 7.6.1), and the ones aiohttp sets itself.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "content-length", REQUEST_ID_HEADER.lower()})


class MasterUnavailableError(PaiError):
    """The front could not reach the master behind it (starting, stopping, or ended)."""

    code = "UnknownError"
    status = 503


def _forwarded(request: web.Request) -> CIMultiDict[str]:
    headers = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP)
    headers["X-Forwarded-For"] = request.remote or ""
    return headers


def _answered(request: web.Request, headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    """The master's response headers, less the hop's; the request id becomes the master's (its log names it)."""
    request_id = headers.get(REQUEST_ID_HEADER)
    if request_id:
        request[REQUEST_ID] = request_id
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in HOP_BY_HOP)


@dataclass
class Generations:
    """The master's cache generations the front last followed (None: none yet)."""

    seen: tuple[int, int] | None = None

    def follow(self, launcher: Launcher, now: tuple[int, int] | None) -> None:
        """Forget each of the front's caches whose generation moved; both while the master publishes none."""
        before, self.seen = self.seen, now
        if now is None or before is None or now[0] != before[0]:
            launcher.accounts.invalidate()
        if now is None or before is None or now[1] != before[1]:
            launcher.clusters.invalidate()


GENERATIONS = web.AppKey("generations", Generations)  # what the front last followed
LINK = web.AppKey("link", FrontLink)


@web.middleware
async def _follow_master(request: web.Request, handler: Handler) -> web.StreamResponse:
    request.app[GENERATIONS].follow(request.app[LAUNCHER], request.app[LINK].generations())
    return await handler(request)


async def pass_through(request: web.Request) -> web.StreamResponse:
    """Every request the front does not answer itself: to the master, and its answer back as it comes."""
    websocket = request.headers.get("Upgrade", "").lower() == "websocket"
    body = await request.read() if request.body_exists else None
    if (websocket or request.method not in READS) and request.app[LINK].hand_over(request, body):
        return web.Response()  # never sent: the front's copy of the connection is closed
    if websocket:
        return await _websocket(request)
    try:
        async with request.app[MASTER].request(request.method, UPSTREAM + request.raw_path, data=body,
                                               headers=_forwarded(request), allow_redirects=False,
                                               auto_decompress=False) as answer:
            response = web.StreamResponse(status=answer.status, reason=answer.reason,
                                          headers=_answered(request, answer.headers))
            if answer.content_length is not None:
                response.content_length = answer.content_length
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
    except ClientError as e:
        raise MasterUnavailableError(f"the master is not answering ({e or type(e).__name__}); try again") from None
    return response


async def _websocket(request: web.Request) -> web.StreamResponse:
    """A WebSocket (an agent's channel): opened to the master first, so that a refusal is the master's own answer;
    then every message is passed on both ways until either side closes."""
    try:
        upstream = await request.app[MASTER].ws_connect(UPSTREAM + request.raw_path, headers=_forwarded(request))
    except WSServerHandshakeError:  # refused (a bad token): ask again without the upgrade, for the master's answer
        return await _refusal(request)
    except ClientError as e:
        raise MasterUnavailableError(f"the master is not answering ({e or type(e).__name__}); try again") from None
    downstream = web.WebSocketResponse(heartbeat=PING_SECONDS)  # the front's pings find a dead peer
    await downstream.prepare(request)
    request.app[SOCKETS].add(downstream)
    async with upstream:
        pumps = [asyncio.create_task(_pump(upstream, downstream)), asyncio.create_task(_pump(downstream, upstream))]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
        code = upstream.close_code if upstream.closed and upstream.close_code else downstream.close_code
        await downstream.close(code=code or 1000)
    request.app[SOCKETS].discard(downstream)
    return downstream


async def _close_sockets(app: web.Application) -> None:
    """``on_shutdown``: open WebSockets would hold the front's shutdown; their peers reconnect."""
    sockets: set[web.WebSocketResponse] = app[SOCKETS]
    for ws in list(sockets):
        await ws.close(code=WSCloseCode.GOING_AWAY, message=b"front shutting down")


async def _pump(source: Socket, sink: Socket) -> None:
    async for message in source:
        if message.type is WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type is WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        else:
            return


async def _refusal(request: web.Request) -> web.Response:
    headers = _forwarded(request)
    for name in ("Sec-WebSocket-Key", "Sec-WebSocket-Version", "Sec-WebSocket-Extensions"):
        headers.popall(name, None)
    async with request.app[MASTER].get(UPSTREAM + request.raw_path, headers=headers) as answer:
        return web.Response(status=answer.status, body=await answer.read(),
                            headers=_answered(request, answer.headers))


async def metrics(request: web.Request) -> web.Response:
    """``GET /metrics``: the master's, with the front's timings of the requests it answered itself."""
    try:
        async with request.app[MASTER].get(UPSTREAM + "/metrics") as answer:
            text = await answer.text()
            content_type = answer.headers.get("Content-Type", "text/plain")
    except ClientError as e:
        raise MasterUnavailableError(f"the master is not answering ({e or type(e).__name__}); try again") from None
    body = merged_metrics(text, generate_latest(request.app[LAUNCHER].metrics.rest_seconds).decode())
    return web.Response(body=body.encode(), headers={"Content-Type": content_type})


async def _store(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    store = StoreThread()
    db = Database(config.db_url())
    app[STORE], app[DB] = store, db
    app[LAUNCHER] = Launcher(db, config.launcher)  # only its reads run here: every write passes to the master
    app[LISTS] = Lists(db, store, config.list_processes)
    app[LISTS].start()
    yield
    await asyncio.get_running_loop().run_in_executor(None, app[LISTS].close)
    await store.call(db.dispose)
    store.close()


@web.middleware
async def _timing(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The front times the requests it answers itself; the master times what passes through (and its metrics)."""
    if request.match_info.handler in (pass_through, metrics):
        return await handler(request)
    return await timing_middleware(request, handler)


def _master_client(socket_path: str) -> Callable[[web.Application], AsyncIterator[None]]:
    async def context(app: web.Application) -> AsyncIterator[None]:
        connector = UnixConnector(path=socket_path, limit=0)
        async with ClientSession(connector=connector, timeout=ClientTimeout(total=None)) as session:
            app[MASTER] = session
            yield

    return context


async def _close_link(link: FrontLink) -> None:
    link.close()


def make_front_app(config: MasterConfig, master_socket: str) -> web.Application:
    """The front: the master's own handlers for the routes marked ``FRONT``; everything else to ``master_socket``."""
    parser = {"max_line_size": PARSER_LINE_LIMIT, "max_field_size": PARSER_LINE_LIMIT, "logger": DOOR_LOGGER}
    app = web.Application(middlewares=[_follow_master, _timing, error_middleware],
                          client_max_size=config.max_body_bytes, handler_args=parser)
    app.on_response_prepare.append(add_request_id)
    app[CONFIG] = config
    app[SOCKETS] = set()
    app[GENERATIONS] = Generations()
    app[LINK] = FrontLink(master_socket)
    app.on_shutdown.append(_close_sockets)
    app.on_cleanup.append(lambda a: _close_link(a[LINK]))
    app.cleanup_ctx.extend([_store, _master_client(master_socket)])
    app.on_startup.append(freeze_heap)  # after the contexts above have started
    app.add_routes(served_by_front())
    app.router.add_get("/metrics", metrics)
    app.router.add_route("*", "/{tail:.*}", pass_through)
    return app

