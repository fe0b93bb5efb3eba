"""Bad HTTP at the door costs one line: requests aiohttp's parser refuses, flooded at a real master's port, are
logged as rate-limited WARNING lines without a traceback; the answers are still aiohttp's 400."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from pai.protocol.door import DOOR_LOGGER, RefusalFilter
from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig

Client = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]
BURST = 10


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Iterator[Clock]:
    """A fresh filter on the door's logger with a clock the test moves (the process-wide one keeps its counts)."""
    kept = list(DOOR_LOGGER.filters)
    clock = Clock()
    DOOR_LOGGER.filters[:] = [RefusalFilter(burst=BURST, window=60.0, clock=clock)]
    yield clock
    DOOR_LOGGER.filters[:] = kept


@pytest.fixture
async def client(tmp_path: Path, aiohttp_client: Client) -> AsyncIterator[TestClient[Any, Any]]:
    config = MasterConfig(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'pai.db'}", tick_seconds=0.05)
    yield await aiohttp_client(make_app(config))


MALFORMED = {
    "header line over 64 KiB": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 70_000 + b"\r\n\r\n",
    "request line over 64 KiB": b"GET /" + b"x" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "too many headers": b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                        + b"".join(b"X-%d: v\r\n" % i for i in range(200)) + b"\r\n",
    "bad header name": b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: v\r\n\r\n",
    "bad version": b"GET /healthz HTTP/9.x\r\nHost: x\r\n\r\n",
}


async def _send(client: TestClient[Any, Any], request: bytes) -> int:
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return int(answer.split(b" ", 2)[1])


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name in (DOOR_LOGGER.name, "aiohttp.server")]


@pytest.mark.parametrize("request_bytes", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_each_refusal_is_one_warning_line_without_a_traceback(
    client: TestClient[Any, Any], clock: Clock, caplog: pytest.LogCaptureFixture, request_bytes: bytes
) -> None:
    caplog.set_level(logging.INFO)
    assert await _send(client, request_bytes) == 400
    [line] = _lines(caplog)
    assert (line.levelname, line.exc_info, line.getMessage()) == ("WARNING", None, "refused a malformed HTTP request")
    assert line.__dict__["peer"] == "127.0.0.1" and line.__dict__["status"] == 400 and line.__dict__["reason"]


async def test_a_flood_of_a_thousand_costs_a_burst_of_lines_and_then_one_that_counts(
    client: TestClient[Any, Any], clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    kinds = list(MALFORMED.values())
    for i in range(1000):
        assert await _send(client, kinds[i % len(kinds)]) == 400
    flood = _lines(caplog)
    assert len(flood) == BURST and all(r.levelname == "WARNING" and r.exc_info is None for r in flood)
    assert "Traceback" not in caplog.text
    clock.now += 60  # the next window: its first line says how many went unlogged
    assert await _send(client, kinds[0]) == 400
    assert _lines(caplog)[-1].__dict__["refused_unlogged_before"] == 1000 - BURST
    assert (await client.get("/healthz")).status == 200  # the master serves on


async def test_what_is_not_a_parser_refusal_keeps_its_traceback(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    try:
        raise RuntimeError("a real failure")
    except RuntimeError:
        DOOR_LOGGER.exception("Error handling request from %s", "127.0.0.1")
    [line] = _lines(caplog)
    assert line.levelname == "ERROR" and line.exc_info is not None
