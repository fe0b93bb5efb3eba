"""The master's app factories: engines and loops live in ``cleanup_ctx``; one route table; one error middleware.

One topology per database (docs/architecture.md):

- ``make_app``: SQLite (``pai up``, ``pai master`` by default). One process serves users and agents, and runs the
  launcher.
- PostgreSQL: ``make_launcher_app`` in the ``pai master`` process (the agents' endpoints on the launcher's port,
  the elected launcher, the migrations, the cluster configuration file), and ``make_api_app`` in each of the
  ``--workers`` processes that gunicorn starts on the public port (``pai.rest_server.serve``): stateless, each
  request a transaction of its own; the agents' endpoints there send the agents to the leading launcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import ClientSession, DummyCookieJar, TCPConnector, web

from pai.jobspec.vcconfig import load_cluster_config
from pai.launcher.loop import LauncherLoop
from pai.launcher.role import Role
from pai.launcher.service import Launcher
from pai.launcher.storethread import StoreThread
from pai.launcher.vcadmin import VcAdmin
from pai.protocol.door import DOOR_LOGGER
from pai.rest_server import logfollow, sessions
from pai.rest_server.channel import AgentChannels
from pai.rest_server.config import MasterConfig
from pai.rest_server.errors import PARSER_LINE_LIMIT, add_request_id, error_middleware
from pai.rest_server.keys import (
    AGENT_TOKEN,
    CHANNELS,
    CONFIG,
    DB,
    HTTP,
    LAUNCHER,
    LOOP,
    PART,
    REPORTS,
    ROLE,
    SERVICE,
    SOCKETS,
    STORE,
    VCADMIN,
    WAKE,
    Part,
)
from pai.rest_server.leading import leadership, new_holder
from pai.rest_server.metrics import timing_middleware
from pai.rest_server.reports import ReportBatcher
from pai.rest_server.routes import agent_routes, elsewhere_routes, monitor_routes, user_routes
from pai.rest_server.service import Service
from pai.rest_server.sockets import OpenSockets
from pai.rest_server.wakeups import wakeups
from pai.store.db import Checkpoint, Database
from pai.store.private import private_dir

log = logging.getLogger("pai.master")
CHECKPOINT_SECONDS = 1.0  # SQLite: how often the write-ahead log is checkpointed (``_checkpoints``)
RESTART_PAGES = 8_192  # SQLite: a log this long (pages) is restarted by a checkpoint's second step (``_checkpoints``)


def _ignore() -> None:
    """An API worker's wake-up: the launcher hears of the change from the database (NOTIFY)."""


async def _database(app: web.Application) -> AsyncIterator[None]:
    config, part = app[CONFIG], app[PART]
    private_dir(config.data_dir)  # 0700: the database, the tokens and the secret key are in it
    app[AGENT_TOKEN] = config.resolve_agent_token()
    store = StoreThread()
    # A master's sessions end on the server if frozen in a transaction past the step-down: a fenced write keeps the
    # lease row locked until then, and the standby's takeover waits for it; an API worker's write keeps its rows
    # locked, and the new leader's writes to them wait for it
    db = Database(config.db_url(), idle_in_transaction_seconds=config.lease.step_down_after,
                  background_checkpoints=True)  # SQLite: ``_checkpoints`` runs them
    keyring = await store.call(config.secret_keyring, db.engine)
    if part.launches():
        log.info("job secrets are sealed with the secret key from source=%s", keyring.source)
    db.use_keyring(keyring)
    app[STORE], app[DB] = store, db
    app[LAUNCHER] = Launcher(db, config.launcher, protected_paths=(str(config.data_dir),))
    writer = app[LAUNCHER].metrics.writer_seconds
    store.observe = lambda call, seconds: writer.labels(call).observe(seconds)
    app[VCADMIN] = VcAdmin(db, app[LAUNCHER].clock, app[LAUNCHER].clusters, app[LAUNCHER].accounts)
    app[SERVICE] = Service(app[LAUNCHER], app[VCADMIN], store, wake=lambda: app[WAKE]())
    app[REPORTS] = ReportBatcher(store, db, app[LAUNCHER].metrics.report_batch.observe)
    if part.launches():
        await _prepare(app, store, db)
    yield
    await store.call(app[REPORTS].close)
    await store.call(db.dispose)
    store.close()


async def _prepare(app: web.Application, store: StoreThread, db: Database) -> None:
    """What the launcher's process does once at start, before any worker serves: the migrations, the first admin,
    the cluster configuration file."""
    config = app[CONFIG]
    if not config.agent_token:
        log.info("agents must present the token kept in file=%s", config.agent_token_file)
    await store.call(db.migrate)  # refuses a key that does not open what the database has sealed
    if config.admin_password:
        await store.call(app[LAUNCHER].accounts.ensure_admin, config.admin_user, config.admin_password)
    if config.vc_config is not None:
        doc = load_cluster_config(config.vc_config.read_text(), str(config.vc_config))
        await store.call(app[VCADMIN].apply_file, doc)
        log.info("cluster configuration applied file=%s vcs=%d", config.vc_config,
                 len(doc.get("virtualClusters", [])))


async def _checkpoints(app: web.Application) -> AsyncIterator[None]:
    """SQLite: the write-ahead log is copied into the database file every ``CHECKPOINT_SECONDS``, not by whichever
    commit takes it past 1,000 pages (that commit waited for the disk, 60-290 ms measured, with the writer thread and
    every report behind it): on a thread of its own, writes going on meanwhile; and once the log is ``RESTART_PAGES``
    long, then the few pages they added on the writer thread, where no write runs beside it, so that the log is
    whole in the file and the next write starts it again from its beginning (a log that writes always run beside is
    never restarted: it grows; the writer's step syncs the file, milliseconds of the writer each time). ADR 0005.
    Nothing to do on PostgreSQL."""
    db, store, metrics = app[DB], app[STORE], app[LAUNCHER].metrics

    async def checkpoint(on: str, run: Callable[[], Awaitable[Checkpoint | None]]) -> Checkpoint | None:
        began = time.perf_counter()
        done = await run()
        metrics.checkpoint_seconds.labels(on).observe(time.perf_counter() - began)
        if done is not None:
            metrics.wal_pages.set(max(done.frames, 0))
        return done

    async def run() -> None:
        while True:
            await asyncio.sleep(CHECKPOINT_SECONDS)
            try:
                done = await checkpoint("thread", lambda: asyncio.to_thread(db.checkpoint))
                if done is not None and done.frames >= RESTART_PAGES:
                    await checkpoint("writer", lambda: store.call(db.checkpoint))
            except Exception:  # the disk, the file: tried again at the next one (the commits do not wait for it)
                log.exception("SQLite checkpoint failed")

    task = asyncio.create_task(run(), name="sqlite checkpoints") if db.dialect == "sqlite" else None
    yield
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task  # (the last connection to close checkpoints what is left, as SQLite does)


async def _launcher_loop(app: web.Application) -> AsyncIterator[None]:
    app[ROLE] = Role(new_holder(app[CONFIG].launcher_url()), leading=False, metrics=app[LAUNCHER].metrics)
    loop = LauncherLoop(app[LAUNCHER], app[STORE], app[CONFIG].tick_seconds, notify=app[CHANNELS].poke,
                        role=app[ROLE])
    app[LOOP] = loop
    app[WAKE] = loop.wake
    task = asyncio.create_task(loop.run(), name="launcher-loop")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await asyncio.to_thread(loop.decider.close)  # the searcher's process, if it was started


async def _http_client(app: web.Application) -> AsyncIterator[None]:
    # no cookie jar: the proxy relays users' cookies itself, and one task's cookies must never reach another; no
    # limit on connections: every proxied request and WebSocket holds one for as long as it lasts
    async with ClientSession(cookie_jar=DummyCookieJar(), connector=TCPConnector(limit=0)) as session:
        app[HTTP] = session
        yield


def _base(config: MasterConfig, part: Part) -> web.Application:
    # aiohttp's parser answers a longer request line or header itself, in plain text; below its limit the error
    # middleware refuses what is too long with a JSON 414/431 (see pai.rest_server.errors).
    parser = {"max_line_size": PARSER_LINE_LIMIT, "max_field_size": PARSER_LINE_LIMIT, "logger": DOOR_LOGGER}
    app = web.Application(middlewares=[timing_middleware, error_middleware], client_max_size=config.max_body_bytes,
                          handler_args=parser)
    app.on_response_prepare.append(add_request_id)
    app[CONFIG], app[PART] = config, part
    sessions.install(app)  # exec sessions and followed logs end at shutdown instead of holding it
    logfollow.install(app)
    app[SOCKETS] = OpenSockets()
    app.on_shutdown.append(lambda a: a[SOCKETS].close_all())  # open tunnels would hold the shutdown
    contexts: list[Callable[[web.Application], AsyncIterator[None]]] = [_database, _checkpoints]
    if part.launches():
        app[CHANNELS] = AgentChannels(epoch=lambda: app[LAUNCHER].epoch)  # pokes are sent once the launcher is up
        app.on_shutdown.append(lambda a: a[CHANNELS].close())  # open WebSockets would hold the shutdown
        contexts += [_launcher_loop, leadership, wakeups]
    else:
        app[WAKE] = _ignore
    app.cleanup_ctx.extend([*contexts, _http_client])
    return app


def make_app(config: MasterConfig) -> web.Application:
    """The whole master in one process (SQLite)."""
    app = _base(config, Part.WHOLE)
    app.add_routes([*user_routes, *monitor_routes, *agent_routes])
    return app


def make_launcher_app(config: MasterConfig) -> web.Application:
    """The launcher's process (PostgreSQL): the agents' endpoints, /healthz and /metrics."""
    app = _base(config, Part.LAUNCHER)
    app.add_routes([*monitor_routes, *agent_routes])
    return app


def make_api_app(config: MasterConfig) -> web.Application:
    """An API worker (PostgreSQL): the users' API; an agent is sent to the leading launcher."""
    app = _base(config, Part.API)
    app.add_routes([*user_routes, *monitor_routes, *elsewhere_routes])
    return app
