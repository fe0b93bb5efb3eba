"""How N aiohttp worker processes share one port (docs/adr/0001-master-topology.md): ``python bench/api_workers.py
[--workers N] [--seconds S]``.

Serves a trivial JSON handler (``/fast``) and one that holds its worker's event loop for 50 ms (``/slow``) from
N processes, four ways: one process; SO_REUSEPORT (each process ``web.TCPSite(..., reuse_port=True)``: a listening
socket each); one socket bound first and shared by forked processes (``web.SockSite``); gunicorn's arbiter with
``aiohttp.GunicornWebWorker`` (when gunicorn is importable: it is no dependency of pai). For each: /fast req/s from
16 clients (a new connection per request), then /fast req/s and p50/p99 from 4 clients beside one client streaming
/slow, and how the requests split over the processes. The load generator shares the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import importlib.util
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

import aiohttp
from aiohttp import web

HOST = "127.0.0.1"


async def fast(_request: web.Request) -> web.Response:
    return web.json_response({}, headers={"X-Pid": str(os.getpid())})


async def slow(_request: web.Request) -> web.Response:
    time.sleep(0.05)  # a large page serialised, say: the loop is held
    return web.json_response({}, headers={"X-Pid": str(os.getpid())})


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_routes([web.get("/fast", fast), web.get("/slow", slow)])
    return app


async def app_factory() -> web.Application:  # gunicorn's entry point
    return make_app()


async def _worker(port: int, sock: socket.socket | None) -> None:
    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    site = web.SockSite(runner, sock) if sock else web.TCPSite(runner, HOST, port, reuse_port=True)
    await site.start()
    await asyncio.Event().wait()


def serve(mode: str, workers: int, port: int) -> None:
    """Fork ``workers`` processes on ``port`` (mode "reuseport" or "shared") and wait for them."""
    sock = None
    if mode == "shared":
        sock = socket.create_server((HOST, port), backlog=128)
        sock.setblocking(False)
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            asyncio.run(_worker(port, sock))
            os._exit(0)
        children.append(pid)
    signal.signal(signal.SIGTERM, lambda *_: [os.kill(p, signal.SIGKILL) for p in children] and sys.exit(0))
    for pid in children:
        os.waitpid(pid, 0)


async def _hammer(session: aiohttp.ClientSession, url: str, until: float, took: list[float],
                  pids: collections.Counter[str]) -> None:
    while time.monotonic() < until:
        start = time.perf_counter()
        async with session.get(url) as response:
            await response.read()
            pids[response.headers["X-Pid"]] += 1
        took.append(time.perf_counter() - start)


async def load(port: int, seconds: float) -> str:
    base = f"http://{HOST}:{port}"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True, limit=0)) as session:
        for _ in range(100):
            try:
                async with session.get(base + "/fast") as response:
                    await response.read()
                break
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
        took: list[float] = []
        pids: collections.Counter[str] = collections.Counter()
        until = time.monotonic() + seconds
        await asyncio.gather(*[_hammer(session, base + "/fast", until, took, pids) for _ in range(16)])
        alone = f"/fast alone {len(took) / seconds:,.0f} req/s, split {sorted(pids.values())}"
        took, pids = [], collections.Counter()
        until = time.monotonic() + seconds
        await asyncio.gather(_hammer(session, base + "/slow", until, [], collections.Counter()),
                             *[_hammer(session, base + "/fast", until, took, pids) for _ in range(4)])
        q = statistics.quantiles(took, n=100)
        return (f"{alone}; beside /slow {len(took) / seconds:,.0f} req/s, p50 {q[49] * 1000:.1f} ms, "
                f"p99 {q[98] * 1000:.1f} ms, split {sorted(pids.values())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--serve", nargs=3, metavar=("MODE", "N", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), int(args.serve[2]))
        return
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]
    me = [sys.executable, __file__, "--serve"]
    n = str(args.workers)
    ways = {"one process": [*me, "reuseport", "1", str(port)], f"SO_REUSEPORT x{n}": [*me, "reuseport", n, str(port)],
            f"one shared socket x{n}": [*me, "shared", n, str(port)]}
    if importlib.util.find_spec("gunicorn") is not None:
        ways[f"gunicorn x{n}"] = [sys.executable, "-m", "gunicorn", "bench.api_workers:app_factory", "-w", n,
                                  "--worker-class", "aiohttp.GunicornWebWorker", "-b", f"{HOST}:{port}",
                                  "--log-level", "warning"]
    for name, command in ways.items():
        server = subprocess.Popen(command, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        try:
            print(f"{name:24} {asyncio.run(load(port, args.seconds))}", flush=True)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
