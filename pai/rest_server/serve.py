"""How ``pai master`` serves its address: alone, or behind the read front (``pai.rest_server.front``).

Behind the front, the master's process binds the public address first (so that a port in use is reported at
once), starts the master on a Unix socket, then starts the front in a process of its own (spawned: a fresh
interpreter, not a fork of one with threads), handing it the bound socket. A front that ends unexpectedly is
started again on the same socket; the master ends it before it stops itself, and the front ends with the master
even if the master is killed (its watchdog).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import multiprocessing
import os
import signal
import socket
import tempfile
import threading
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path

from aiohttp import web

from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig
from pai.rest_server.front import MASTER_SOCKET, make_front_app
from pai.rest_server.handoff import MasterLink
from pai.rest_server.listing import end_with
from pai.store.private import private_dir

log = logging.getLogger("pai.master")

PR_SET_PDEATHSIG = 1  # prctl(2)
RESTART_SECONDS = 1.0  # the pause before a front that ended is started again
STOP_SECONDS = 10.0  # how long the front may take to finish its requests when the master stops
MAX_SOCKET_PATH = 100  # a Unix socket's path is at most 107 bytes on Linux


def bind(host: str, port: int) -> socket.socket:
    """The public address, bound (raises OSError with EADDRINUSE when it is taken)."""
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


def serve(config: MasterConfig, echo: Callable[[str], None], setup: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM, behind the front if ``config.front``. ``setup`` configures a process's logging
    (it is given the process's name)."""
    public = bind(config.host, config.port)
    agents = [] if config.agent_port is None else [bind(config.host, config.agent_port)]
    if not config.front:
        web.run_app(make_app(config), sock=[public, *agents], print=None)
        return
    asyncio.run(_behind_front(config, public, agents, echo, setup))


def master_socket_path(data_dir: Path) -> str:
    path = str(data_dir / MASTER_SOCKET)
    if len(path) <= MAX_SOCKET_PATH:
        return path
    return os.path.join(tempfile.mkdtemp(prefix="pai-master-"), MASTER_SOCKET)  # a data directory deep down


async def _behind_front(config: MasterConfig, public: socket.socket, agents: list[socket.socket],
                        echo: Callable[[str], None], setup: Callable[[str], None]) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    path = master_socket_path(config.data_dir)
    private_dir(config.data_dir)
    runner = web.AppRunner(make_app(config), handle_signals=False)
    await runner.setup()
    link = MasterLink(path)
    try:
        if os.path.exists(path):
            os.unlink(path)  # left by a master that was killed
        await web.UnixSite(runner, path).start()
        os.chmod(path, 0o600)  # only this user's processes (the front) reach the master without the front
        await link.start(runner)
        for sock in agents:  # the agents' port: the master itself, with no hop through the front
            await web.SockSite(runner, sock).start()
        front = _start_front(config, public, path, setup)
        echo(f"pai master on http://{config.host}:{config.port} (front pid {front.pid}, master pid {os.getpid()})")
        while not stop.is_set():
            ended: asyncio.Future[object] = loop.run_in_executor(None, front.join)
            stopping: asyncio.Future[object] = asyncio.ensure_future(stop.wait())
            await asyncio.wait([ended, stopping], return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set():
                break
            stopping.cancel()
            exitcode = front.exitcode
            await asyncio.sleep(RESTART_SECONDS)
            front = _start_front(config, public, path, setup)
            log.warning("the front ended unexpectedly exitcode=%s; started again front_pid=%s", exitcode, front.pid)
        await loop.run_in_executor(None, _end, front)
    finally:
        link.close()
        await runner.cleanup()
        public.close()
        if os.path.exists(path):
            os.unlink(path)


def _start_front(config: MasterConfig, public: socket.socket, master_socket: str,
                 setup: Callable[[str], None]) -> BaseProcess:
    context = multiprocessing.get_context("spawn")
    process = context.Process(target=run_front, args=(config, public, master_socket, os.getpid(), setup),
                              name="pai-front")
    process.start()
    return process


def _end(front: BaseProcess) -> None:
    if front.is_alive():
        front.terminate()  # SIGTERM: the front finishes the requests in flight
        front.join(STOP_SECONDS)
    if front.is_alive():
        front.kill()
        front.join()


def run_front(config: MasterConfig, public: socket.socket, master_socket: str, master_pid: int,
              setup: Callable[[str], None]) -> None:
    """The front process: serve ``public`` until SIGTERM or SIGINT, or until the master has ended."""
    setup("front")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the master, which ends the front
    _end_with_parent(master_pid)
    threading.Thread(target=end_with, args=(master_pid,), name="pai-front-watchdog", daemon=True).start()
    asyncio.run(_front(config, public, master_socket))


def _end_with_parent(master_pid: int) -> None:
    """SIGTERM as soon as the master's process ends (Linux's parent-death signal), so that a master started again
    at once finds its port free; the watchdog thread (once a second) covers the rest."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != master_pid:  # it ended before the signal was asked for
        raise SystemExit(0)


async def _front(config: MasterConfig, public: socket.socket, master_socket: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    runner = web.AppRunner(make_front_app(config, master_socket), handle_signals=False, access_log=None)
    await runner.setup()
    try:
        await web.SockSite(runner, public).start()
        await stop.wait()
    finally:
        await runner.cleanup()
