"""The master's app factory: engines and loops live in ``cleanup_ctx``; one route table; one error middleware."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator

from aiohttp import ClientSession, web
from aiohttp.typedefs import Handler

from pai.jobspec.vcconfig import load_cluster_config
from pai.launcher.loop import LauncherLoop, StoreThread
from pai.launcher.role import Role
from pai.launcher.service import Launcher
from pai.launcher.vcadmin import VcAdmin
from pai.protocol.door import DOOR_LOGGER
from pai.rest_server.channel import AgentChannels
from pai.rest_server.config import MasterConfig
from pai.rest_server.errors import PARSER_LINE_LIMIT, add_request_id, error_middleware
from pai.rest_server.heap import freeze_heap
from pai.rest_server.keys import AGENT_TOKEN, CHANNELS, CONFIG, DB, HTTP, LAUNCHER, LISTS, LOOP, ROLE, STORE, VCADMIN
from pai.rest_server.leading import leadership, new_holder
from pai.rest_server.listing import Lists
from pai.rest_server.metrics import timing_middleware
from pai.rest_server.routes import routes
from pai.rest_server.wakeups import wakeups
from pai.store.db import Database
from pai.store.private import private_dir

log = logging.getLogger("pai.master")


async def _database(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    private_dir(config.data_dir)  # 0700: the database, the tokens and the secret key are in it
    app[AGENT_TOKEN] = config.resolve_agent_token()
    if not config.agent_token:
        log.info("agents must present the token kept in file=%s", config.agent_token_file)
    store = StoreThread()
    db = Database(config.db_url())
    keyring = await store.call(config.secret_keyring, db.engine)
    log.info("job secrets are sealed with the secret key from source=%s", keyring.source)
    db.use_keyring(keyring)
    await store.call(db.migrate)  # refuses a key that does not open what the database has sealed
    app[STORE] = store
    app[DB] = db
    app[LAUNCHER] = Launcher(db, config.launcher, protected_paths=(str(config.data_dir),))
    app[ROLE] = Role(new_holder(config.advertised()), leading=False, metrics=app[LAUNCHER].metrics)  # elected below
    if config.admin_password:
        await store.call(app[LAUNCHER].accounts.ensure_admin, config.admin_user, config.admin_password)
    app[LISTS] = Lists(db, store, 0 if config.front else config.list_processes)  # the front reads long ones
    app[LISTS].start()
    app[VCADMIN] = VcAdmin(db, app[LAUNCHER].clock, app[LAUNCHER].clusters, app[LAUNCHER].accounts)
    if config.vc_config is not None:
        doc = load_cluster_config(config.vc_config.read_text(), str(config.vc_config))
        await store.call(app[VCADMIN].apply_file, doc)
        log.info("cluster configuration applied file=%s vcs=%d", config.vc_config,
                 len(doc.get("virtualClusters", [])))
    yield
    await asyncio.get_running_loop().run_in_executor(None, app[LISTS].close)
    await store.call(db.dispose)
    store.close()


async def _launcher_loop(app: web.Application) -> AsyncIterator[None]:
    loop = LauncherLoop(app[LAUNCHER], app[STORE], app[CONFIG].tick_seconds, notify=app[CHANNELS].poke,
                        role=app[ROLE])
    app[LOOP] = loop
    task = asyncio.create_task(loop.run(), name="launcher-loop")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _http_client(app: web.Application) -> AsyncIterator[None]:
    async with ClientSession() as session:
        app[HTTP] = session
        yield


def _from_front(request: web.Request) -> bool:
    """Whether the request came on the master's Unix socket: from the front (only its user's processes can open
    the socket)."""
    sock = request.transport.get_extra_info("socket") if request.transport is not None else None
    return sock is not None and sock.family == socket.AF_UNIX


@web.middleware
async def _forwarded_for(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Behind the front, a request arrives on the master's Unix socket and names its caller's address in
    ``X-Forwarded-For``; on a TCP socket that header is the caller's own claim."""
    forwarded = request.headers.get("X-Forwarded-For")
    if forwarded is not None and _from_front(request):
        request = request.clone(remote=forwarded.rsplit(",", 1)[-1].strip())
    return await handler(request)


def make_app(config: MasterConfig) -> web.Application:
    # aiohttp's parser answers a longer request line or header itself, in plain text; below its limit the error
    # middleware refuses what is too long with a JSON 414/431 (see pai.rest_server.errors).
    parser = {"max_line_size": PARSER_LINE_LIMIT, "max_field_size": PARSER_LINE_LIMIT, "logger": DOOR_LOGGER}
    app = web.Application(middlewares=[_forwarded_for, timing_middleware, error_middleware],
                          client_max_size=config.max_body_bytes, handler_args=parser)
    app.on_response_prepare.append(add_request_id)
    app[CONFIG] = config
    app[CHANNELS] = AgentChannels(epoch=lambda: app[LAUNCHER].epoch)  # pokes are sent once the launcher is up
    app.on_shutdown.append(lambda a: a[CHANNELS].close())  # open WebSockets would hold the shutdown
    app.cleanup_ctx.extend([_database, _launcher_loop, leadership, wakeups, _http_client])
    app.on_startup.append(freeze_heap)  # after the contexts above have started
    app.add_routes(routes)
    return app
