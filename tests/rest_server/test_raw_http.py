"""HTTP as a client may really send it, over a plain socket: URLs and headers past the master's limits and bodies
past its body limit get ``{code, message}`` JSON; past aiohttp's own parser limit, aiohttp's plain 400."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig
from pai.rest_server.errors import REQUEST_ID_HEADER

Client = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]


@pytest.fixture
async def sqlite_client(tmp_path: Path, aiohttp_client: Client) -> AsyncIterator[TestClient[Any, Any]]:
    config = MasterConfig(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'pai.db'}", tick_seconds=0.05,
                          max_body_bytes=2048)
    yield await aiohttp_client(make_app(config))


async def _raw(client: TestClient[Any, Any], request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes to the master over a plain socket; the status, headers and body of its answer."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()  # every request below asks for (or forces) a closed connection
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def _get(target: str, *headers: str) -> bytes:
    lines = [f"GET {target} HTTP/1.1", "Host: x", "Connection: close", *headers, "", ""]
    return "\r\n".join(lines).encode()


@pytest.mark.parametrize(
    ("request_bytes", "status", "message"),
    [
        pytest.param(_get("/api/v2/jobs?q=" + "x" * 10_000), 414, "URL: 10015 bytes is longer than the maximum of 8192",
                     id="10 KB URL"),
        pytest.param(_get("/" + "x" * 60_000), 414, "URL: 60001 bytes is longer than the maximum of 8192",
                     id="60 KB URL"),
        pytest.param(_get("/healthz", "X-Big: " + "y" * 20_000), 431,
                     "X-Big: header of 20005 bytes is larger than the maximum of 8192", id="20 KB header"),
        pytest.param(b"POST /api/v2/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 4000\r\n"
                     b"Content-Type: text/yaml\r\n\r\n" + b"a" * 4000, 401, "Authorization:", id="no token"),
    ],
)
async def test_long_urls_and_headers_get_json_over_a_raw_socket(
    sqlite_client: TestClient[Any, Any], request_bytes: bytes, status: int, message: str
) -> None:
    got, headers, body = await _raw(sqlite_client, request_bytes)
    assert (got, headers["content-type"]) == (status, "application/json; charset=utf-8")
    answer = json.loads(body)
    assert sorted(answer) == ["code", "message"] and answer["message"].startswith(message)
    assert REQUEST_ID_HEADER.lower() in headers


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(_get("/" + "x" * 70_000), id="URL past the parser limit"),
        pytest.param(b"\x16\x03\x01 not http\r\n\r\n", id="not HTTP"),
    ],
)
async def test_what_aiohttp_refuses_before_the_app_stays_a_400(
    sqlite_client: TestClient[Any, Any], request_bytes: bytes
) -> None:
    """The documented boundary: past aiohttp's parser limit (64 KiB a line) it answers a plain-text 400 itself."""
    status, headers, _ = await _raw(sqlite_client, request_bytes)
    assert (status, headers["content-type"].split(";")[0]) == (400, "text/plain")


async def test_a_body_over_the_limit_is_413_and_stores_nothing(sqlite_client: TestClient[Any, Any]) -> None:
    login = await sqlite_client.post("/api/v2/authn/basic/login", json={"username": "x", "password": "y" * 3000})
    assert login.status == 413
    message = "body: larger than the maximum of 2048 bytes (pai master --max-body-mb)"
    assert await login.json() == {"code": "RequestTooLargeError", "message": message}
