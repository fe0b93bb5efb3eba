"""Proxy overhead benchmark: ``python bench/proxy.py [--requests N] [--database sqlite|postgresql]``.

A real ``pai master`` and one agent (process runtime) run a job whose task serves tests/e2e/taskports_app.py (a
small aiohttp app on its port ``web``). N GETs of a small JSON answer (``/headers``), one at a time over one
keep-alive connection, go to the task's port directly (the node's address) and the same N through the master's
``/proxy/`` (Bearer token), interleaved so that both see the same machine; then the same for a 1 MiB answer, and
N round trips of a small WebSocket message each way. Printed: p50/p95 of each and the proxy's added p50.

Figures, not assertions. Target (issue 28): the proxy adds <= 2 ms p50 per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests
from aiohttp import ClientSession

from bench.figures import line
from tests.dbkit import database_url
from tests.e2e.harness import Cluster, cluster, wait_for

APP = Path(__file__).resolve().parents[1] / "tests" / "e2e" / "taskports_app.py"


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).ok
    except requests.ConnectionError:
        return False


def timed_gets(session: requests.Session, url: str, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    resp = session.get(url, headers=headers, timeout=30)
    resp.content  # noqa: B018 - read it all
    took = time.perf_counter() - started
    assert resp.status_code == 200, resp.text[:200]
    return took


def http_pair(direct: str, proxied: str, token: str, n: int) -> tuple[list[float], list[float]]:
    auth = {"Authorization": f"Bearer {token}"}
    a, b = [], []
    with requests.Session() as s1, requests.Session() as s2:
        for _ in range(10):  # warm both connections and the master's caches
            timed_gets(s1, direct, {})
            timed_gets(s2, proxied, auth)
        for _ in range(n):
            a.append(timed_gets(s1, direct, {}))
            b.append(timed_gets(s2, proxied, auth))
    return a, b


async def ws_pair(direct: str, proxied: str, token: str, n: int) -> tuple[list[float], list[float]]:
    out: list[list[float]] = [[], []]
    async with ClientSession() as session, session.ws_connect(direct) as d, session.ws_connect(
            proxied, headers={"Authorization": f"Bearer {token}"}) as p:
        for i in range(n + 10):
            for k, ws in enumerate((d, p)):
                started = time.perf_counter()
                await ws.send_str("x")
                await ws.receive()
                if i >= 10:
                    out[k].append(time.perf_counter() - started)
    return out[0], out[1]


def report(name: str, direct: list[float], proxied: list[float]) -> None:
    print(line(f"{name} direct", direct))
    print(line(f"{name} via /proxy/", proxied))
    added = (statistics.median(proxied) - statistics.median(direct)) * 1000
    print(f"{name + ' added p50':<28} {added:8.2f} ms   (target <= 2 ms)")


def measure(c: Cluster, n: int) -> None:
    job = {"jobName": "bench-proxy", "image": "busybox", "taskRoles": [
        {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
         "command": f"exec {sys.executable} {APP}",
         "portList": [{"label": label, "beginAt": 0, "portNumber": 1} for label in ("web", "echo")]}]}
    key = c.submit(json.dumps(job))
    detail = c.wait_state(key, {"RUNNING"})
    task = detail["taskRoles"]["main"]["taskStatuses"][0]
    prefix = f"/proxy/{key}/main/0/web"
    direct = f"http://{task['containerIp']}:{task['containerPorts']['web']}{prefix}"
    proxied = c.url + prefix
    token = c.api.http.token or ""
    wait_for("the task's app", lambda: answers(direct + "/headers"), 30)
    report("GET small", *http_pair(direct + "/headers", proxied + "/headers", token, n))
    report("GET 1 MiB", *http_pair(direct + "/big?mb=1", proxied + "/big?mb=1", token, max(n // 4, 20)))
    ws = asyncio.run(ws_pair(direct.replace("http", "ws") + "/ws", proxied.replace("http", "ws") + "/ws", token, n))
    report("WebSocket round trip", *ws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with database_url(args.database, tmp) as url, cluster(tmp, url, [("node-a", "127.0.0.2", 4)]) as c:
            print(f"database: {args.database}")
            measure(c, args.requests)


if __name__ == "__main__":
    main()
