"""How ``pai master`` serves: one process on SQLite; on PostgreSQL, the launcher's process and N API workers.

On SQLite (``config.workers == 0``) one process serves users and agents and runs the launcher (``make_app``).

On PostgreSQL the ``pai master`` process binds the public port and the launcher's port first (so that a port in use
is reported at once), starts the launcher's app (``make_launcher_app``: migrations, the election, the agents'
endpoints on the launcher's port), and then starts gunicorn's arbiter in a process of its own (spawned: a fresh
interpreter, not a fork of one with threads), handing it the bound public socket; the arbiter forks ``workers``
processes with aiohttp's ``GunicornWebWorker``, each building ``make_api_app`` after the fork (docs/adr/0001). An
arbiter that ends unexpectedly is started again; the arbiter ends with this process even if it is killed (Linux's
parent-death signal), and a stop (SIGINT, SIGTERM) ends the workers gracefully first.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import gc
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import weakref
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any

from aiohttp import web
from gunicorn.app.base import BaseApplication  # type: ignore[import-untyped]

from pai.rest_server.app import make_api_app, make_app, make_launcher_app
from pai.rest_server.config import MasterConfig
from pai.rest_server.metrics import MULTIPROC_ENV

log = logging.getLogger("pai.master")

PR_SET_PDEATHSIG = 1  # prctl(2)
RESTART_SECONDS = 1.0  # the pause before an arbiter that ended is started again
STOP_SECONDS = 10  # how long the workers may take to finish their requests when the master stops
KEEPALIVE_SECONDS = 75  # aiohttp's own default (gunicorn's is 2 s)
WORKER_TIMEOUT_SECONDS = 30  # a worker whose event loop has not notified the arbiter for this long is killed
QUICK_ENDS = 3  # an arbiter that ended this many times in a row within BOOT_SECONDS of its start: the master stops
BOOT_SECONDS = 10.0
GC_YOUNG_THRESHOLD = 10_000  # allocations between collections of the youngest generation (CPython's default: 700)


def bind(host: str, port: int) -> socket.socket:
    """The address, bound (raises OSError with EADDRINUSE when it is taken)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise OSError(e.errno, f"port {port} on {host} is already in use") from None
        raise
    return sock


def served(app: web.Application) -> web.Application:
    """The app of a process that serves: once started (its contexts' startup done), what it holds leaves the garbage
    collector's generations (``gc.freeze``: modules, tables, compiled statements, the app), and the youngest is
    collected less often. A full collection had walked all of it, every thread stopped: pauses of 60 to 160 ms,
    several a minute under 1,000 trial reports a second (issue 29's p99). Not in ``make_app``: a test process builds
    many apps, whose objects would never be collected once frozen."""

    async def settle(_: web.Application) -> None:
        gc.collect()
        gc.freeze()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])

    app.on_startup.append(settle)  # after the contexts' startup (``cleanup_ctx`` is the first of ``on_startup``)
    return app


def serve(config: MasterConfig, echo: Callable[[str], None], setup: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM. ``setup`` configures a process's logging (it is given the process's name)."""
    public = bind(config.host, config.port)
    if not config.workers:
        web.run_app(served(make_app(config)), sock=public, print=None)
        return
    launcher = bind(config.host, config.launcher_port_number)
    asyncio.run(_cluster_service(config, public, launcher, echo, setup))


async def _cluster_service(config: MasterConfig, public: socket.socket, launcher: socket.socket,
                           echo: Callable[[str], None], setup: Callable[[str], None]) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    runner = web.AppRunner(served(make_launcher_app(config)), handle_signals=False)
    await runner.setup()  # migrated, elected (or a standby) before any worker serves
    try:
        await web.SockSite(runner, launcher).start()
        api, started, quick = _start_api(config, public, setup), loop.time(), 0
        echo(f"pai master on http://{config.host}:{config.port} ({config.workers} API workers under gunicorn, "
             f"arbiter pid {api.pid}), its launcher on port {config.launcher_port_number} (pid {os.getpid()})")
        while not stop.is_set():
            ended: asyncio.Future[object] = loop.run_in_executor(None, api.join)
            stopping: asyncio.Future[object] = asyncio.ensure_future(stop.wait())
            await asyncio.wait([ended, stopping], return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set():
                break
            stopping.cancel()
            with contextlib.suppress(TimeoutError):  # a terminal's Ctrl-C reaches the arbiter too
                await asyncio.wait_for(stop.wait(), RESTART_SECONDS)
            if stop.is_set():
                break
            exitcode = api.exitcode
            quick = quick + 1 if loop.time() - started < BOOT_SECONDS + RESTART_SECONDS else 0
            if quick >= QUICK_ENDS:
                raise ApiFailedError(f"the API workers' arbiter ended {quick} times in a row as it started "
                                     f"(exit code {exitcode}; its error is above)")
            api, started = _start_api(config, public, setup), loop.time()
            log.warning("the API workers' arbiter ended unexpectedly exitcode=%s; started again pid=%s", exitcode,
                        api.pid)
        await loop.run_in_executor(None, _end, api)
    finally:
        await runner.cleanup()
        public.close()
        launcher.close()


class ApiFailedError(RuntimeError):
    """The API workers cannot start (their error is in the log): the master stops rather than retry for ever."""


def _start_api(config: MasterConfig, public: socket.socket, setup: Callable[[str], None]) -> BaseProcess:
    """The arbiter, spawned with a fresh prometheus_client multiprocess directory (the workers keep their request
    counts there, and each worker's /metrics sums them: ``pai.rest_server.metrics``)."""
    context = multiprocessing.get_context("spawn")
    process = context.Process(target=run_api, args=(config, public, os.getpid(), setup), name="pai-api")
    metrics = tempfile.mkdtemp(prefix="pai-api-metrics-")
    os.environ[MULTIPROC_ENV] = metrics  # read once, as prometheus_client is imported in the new interpreter
    try:
        process.start()
    finally:
        del os.environ[MULTIPROC_ENV]
    weakref.finalize(process, shutil.rmtree, metrics, ignore_errors=True)
    return process


def _end(api: BaseProcess) -> None:
    if api.is_alive():
        api.terminate()  # SIGTERM: gunicorn's graceful stop; the workers finish the requests in flight
        api.join(STOP_SECONDS + 5)
    if api.is_alive():
        api.kill()
        api.join()


class ApiWorkers(BaseApplication):  # type: ignore[misc]  # gunicorn has no type hints
    """gunicorn's arbiter, embedded (its documented custom application): ``workers`` processes accept on the one
    public socket, each serving ``make_api_app``."""

    def __init__(self, config: MasterConfig, public: socket.socket) -> None:
        self.config, self.public = config, public
        super().__init__()

    def load_config(self) -> None:
        settings: dict[str, Any] = {
            "bind": [f"fd://{self.public.fileno()}"],
            "workers": self.config.workers,
            "worker_class": "aiohttp.GunicornWebWorker",
            "keepalive": KEEPALIVE_SECONDS,
            "graceful_timeout": STOP_SECONDS,
            "timeout": WORKER_TIMEOUT_SECONDS,
            "proc_name": "pai-api",
            "accesslog": None,
            "preload_app": False,  # each worker builds its app (its engine, its connections) after the fork
            "control_socket_disable": True,  # gunicorn's runtime control socket (in $HOME): not used
        }
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self) -> web.Application:
        return served(make_api_app(self.config))


def run_api(config: MasterConfig, public: socket.socket, master_pid: int, setup: Callable[[str], None]) -> None:
    """The arbiter's process: serve ``public`` with the API workers until SIGTERM, or until the master has ended."""
    setup("api")
    with contextlib.suppress(OSError, AttributeError):  # the master's death ends it (and so its workers)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != master_pid:  # it ended before the signal was asked for
        raise SystemExit(0)
    public.set_inheritable(True)
    ApiWorkers(config, public).run()
