"""A task's ports through the master, on a real cluster: ``pai master`` (its proxy body limit 1 MiB, users reading
their own jobs only) and one agent on the process runtime, running a job whose task serves a web app and a
WebSocket echo on its port ``web`` under ``$PAI_PROXY_PREFIX/web`` and a TCP echo on its port ``echo``
(tests/e2e/taskports_app.py, with this venv's python).

Through ``/proxy/``: GET and POST with what the task received checked (the prefix and forwarding headers there,
pai's Authorization header and cookie not), a 50 MiB answer, the WebSocket echo; 401 without credentials, 403 for a
user who may not read the job, 409 once a task has ended, 413 over the limit. Through the tunnel: the TCP echo, and
``pai port-forward`` (the CLI as a user runs it). In headless Chromium: the page opened after ``POST
/api/v2/proxy/session``, whose own script opens a WebSocket through the proxy and shows the echo.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from aiohttp import ClientSession, WSMsgType

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.dbkit import BACKENDS, database_url
from tests.e2e.browser import CHROMIUM, playwright
from tests.e2e.harness import Cluster, cluster, stop_process, wait_for

APP = Path(__file__).resolve().parent / "taskports_app.py"
NODE_ADDRESS = "127.0.0.28"  # an address of its own: the task's ports are there
BOB = ("bob", "bob-password")


def ports_job(name: str, command: str) -> str:
    ports = [{"label": label, "beginAt": 0, "portNumber": 1} for label in ("web", "echo")]
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": command,
         "portList": ports}]})


@pytest.fixture(scope="module", params=BACKENDS)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The cluster, with admin~ports serving (its app answers through the proxy) and admin~done ended."""
    tmp = tmp_path_factory.mktemp(f"ports-{request.param}")
    config = tmp / "cluster.json"
    config.write_text(json.dumps({"access": {"jobsReadableByAll": False}}))
    with database_url(request.param, tmp) as url, cluster(
            tmp, url, [("node-a", NODE_ADDRESS, 4)],
            master_args=("--proxy-max-body-mb", "1", "--vc-config", str(config))) as c:
        c.api.create_user({"username": BOB[0], "password": BOB[1]})
        c.submit(ports_job("ports", f"exec {sys.executable} {APP}"))
        c.submit(ports_job("done", "true"))
        c.wait_state("admin~ports", {"RUNNING"})
        c.wait_state("admin~done", {"SUCCEEDED"})
        wait_for("the task's app", lambda: get(c, "/headers").status_code == 200, 30)
        yield c


def proxy_url(c: Cluster, tail: str, job: str = "ports") -> str:
    return f"{c.url}/proxy/admin~{job}/main/0/web{tail}"


def bearer(c: Cluster) -> dict[str, str]:
    return {"Authorization": f"Bearer {c.api.http.token}"}


def get(c: Cluster, tail: str, **kw: Any) -> requests.Response:
    return requests.get(proxy_url(c, tail), headers=kw.pop("headers", bearer(c)), timeout=30, **kw)


def test_requests_reach_the_task_with_the_prefix_and_without_pai_s_credentials(served: Cluster) -> None:
    c = served
    headers = {**bearer(c), "Cookie": "pai_proxy=x; theirs=1"}
    resp = requests.get(proxy_url(c, "/headers?q=1"), headers=headers, timeout=30)
    assert resp.status_code == 200, resp.text
    seen = resp.json()
    got = {k.lower(): v for k, v in seen["headers"].items()}
    assert seen["path"] == "/proxy/admin~ports/main/0/web/headers?q=1"
    assert got["x-forwarded-prefix"] == "/proxy/admin~ports/main/0/web"
    assert got["host"] == got["x-forwarded-host"] == c.url.removeprefix("http://")
    assert got["x-forwarded-proto"] == "http" and got["x-forwarded-for"] == "127.0.0.1"
    assert "authorization" not in got and seen["cookies"] == {"theirs": "1"}

    data = os.urandom(700_000)
    resp = requests.post(proxy_url(c, "/upload"), data=data, headers=bearer(c), timeout=30)
    assert resp.json() == {"size": len(data), "sha": hashlib.sha256(data).hexdigest()}


def test_a_large_answer_streams_through(served: Cluster) -> None:
    digest, size = hashlib.sha256(), 0
    with get(served, "/big?mb=50", stream=True) as resp:
        assert resp.status_code == 200 and "Content-Length" not in resp.headers
        for chunk in resp.iter_content(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    block = bytes(range(256)) * 4096
    assert size == 50 << 20 and digest.hexdigest() == hashlib.sha256(block * 50).hexdigest()


def test_a_websocket_through_the_proxy_and_a_tunnel(served: Cluster) -> None:
    c = served

    async def talk() -> tuple[str, bytes]:
        async with ClientSession() as session:
            async with session.ws_connect(proxy_url(c, "/ws"), headers=bearer(c)) as ws:
                await ws.send_str("hi")
                text = (await ws.receive(timeout=10)).data
            tunnel = f"{c.url}/api/v2/jobs/admin~ports/tasks/main/0/ports/echo/tunnel"
            async with session.ws_connect(tunnel, headers=bearer(c)) as ws:
                await ws.send_bytes(b"through the tunnel")
                msg = await ws.receive(timeout=10)
                assert msg.type is WSMsgType.BINARY
                return text, msg.data

    assert asyncio.run(talk()) == ("echo: hi", b"through the tunnel")
    def kinds() -> set[str]:
        return {e["reason"] for e in c.api.http.json("GET", "/api/v2/jobs/admin~ports/events")["data"]}

    wait_for("the tunnel's events", lambda: {"tunnel-started", "tunnel-ended"} <= kinds(), 10)


def test_refusals(served: Cluster) -> None:
    c = served
    resp = get(c, "/headers", headers={})
    assert (resp.status_code, resp.json()["code"]) == (401, "UnauthorizedUserError")
    bob = MasterApi(HttpClient(c.url)).login(*BOB)["token"]
    resp = get(c, "/headers", headers={"Authorization": f"Bearer {bob}"})
    assert (resp.status_code, resp.json()["code"]) == (403, "ForbiddenUserError")
    resp = requests.get(proxy_url(c, "/", job="done"), headers=bearer(c), timeout=30)
    assert (resp.status_code, resp.json()["code"]) == (409, "TaskNotRunningError")
    resp = requests.post(proxy_url(c, "/upload"), data=b"x" * (2 << 20), headers=bearer(c), timeout=30)
    assert (resp.status_code, resp.json()["code"]) == (413, "RequestTooLargeError")
    assert "1048576 bytes" in resp.json()["message"]


def test_pai_port_forward(served: Cluster) -> None:
    c = served
    env = {**c.env, "PAI_TOKEN": c.api.http.token or "", "PAI_USER": "admin", "HOME": str(c.tmp)}
    cli = subprocess.Popen([sys.executable, "-m", "pai", "port-forward", "ports", "0:echo", "--master", c.url],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert cli.stdout is not None
        line = cli.stdout.readline()
        found = re.match(r"Forwarding 127\.0\.0\.1:(\d+) -> port echo of main\[0\] of admin~ports", line)
        assert found, f"{line!r} {cli.stderr.read() if cli.poll() is not None and cli.stderr else ''}"
        for message in (b"first connection", b"second connection"):
            with socket.create_connection(("127.0.0.1", int(found[1])), timeout=10) as s:
                s.sendall(message)
                s.shutdown(socket.SHUT_WR)  # the task reads EOF through the tunnel, and closes
                got = b""
                while chunk := s.recv(65536):
                    got += chunk
            assert got == message
    finally:
        stop_process(cli)  # type: ignore[arg-type]
    refused = subprocess.run([sys.executable, "-m", "pai", "port-forward", "done", "0:echo", "--master", c.url],
                             capture_output=True, env=env, text=True, timeout=60)
    assert refused.returncode == 1 and "TaskNotRunningError" in refused.stderr, refused.stderr


def test_a_browser_opens_the_proxied_page_and_its_websocket(served: Cluster) -> None:
    pw = playwright()
    assert CHROMIUM.exists()
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            context = browser.new_context()
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            resp = page.goto(proxy_url(served, "/"))
            assert resp is not None and resp.status == 401  # no session yet
            session = context.request.post(f"{served.url}/api/v2/proxy/session", headers=bearer(served))
            assert session.status == 200
            page.goto(proxy_url(served, "/"))
            pw.expect(page.locator("h1")).to_have_text("served by the task")
            pw.expect(page.locator("#echo")).to_have_text("echo: hello from the browser", timeout=20_000)
            cookie = next(k for k in context.cookies() if k["name"] == "pai_proxy")
            assert cookie["httpOnly"] and cookie["path"] == "/proxy/" and cookie["sameSite"] == "Lax"
            assert errors == []
        finally:
            browser.close()
