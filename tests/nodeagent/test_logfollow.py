"""Following a log on the agent: what is written arrives as it is written, and the answer ends with the attempt."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from pai.nodeagent import logcap
from pai.nodeagent.logserver import LogServer
from pai.nodeagent.paths import AgentPaths
from tests.eventually import WAIT_SECONDS

TOKEN = "the-agent-token"
MASTER = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Node:
    url: str
    paths: AgentPaths
    running: set[str] = field(default_factory=set)

    def log(self, attempt: str) -> Path:
        return self.paths.attempt(attempt) / "stdout.log"

    def write(self, attempt: str, data: bytes) -> None:
        with open(self.log(attempt), "ab") as f:
            f.write(data)


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    paths = AgentPaths(tmp_path)
    n = Node("", paths)
    for attempt in ("a1", "a2"):
        paths.attempt(attempt).mkdir(parents=True)
        n.log(attempt).write_bytes(b"")
    server = LogServer(paths, "127.0.0.1", 0, TOKEN, running=n.running.__contains__)
    n.url = f"http://127.0.0.1:{await server.start()}"
    yield n
    await server.close()


class Reader:
    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp, self.got = resp, b""

    async def until(self, wanted: bytes) -> bytes:
        while wanted not in self.got:
            chunk = await self.resp.content.readany()
            assert chunk, f"the answer ended before {wanted!r}; got {self.got!r}"
            self.got += chunk
        return self.got


async def test_follow_streams_what_is_written_and_ends_once_the_attempt_ended(node: Node) -> None:
    node.running.add("a1")
    node.write("a1", b"before\n")
    async with aiohttp.ClientSession() as http, http.get(f"{node.url}/logs/a1/stdout?follow=1",
                                                         headers=MASTER) as resp:
        assert resp.status == 200 and resp.headers["X-Log-Offset"] == "0"
        reader = Reader(resp)
        await reader.until(b"before\n")
        node.write("a1", b"one\n")
        await reader.until(b"one\n")
        assert not resp.content.at_eof()
        node.write("a1", b"last words\n")
        node.running.discard("a1")  # the attempt ended: what it wrote last still arrives, then the answer ends
        rest = await resp.content.read()
    assert reader.got + rest == b"before\none\nlast words\n"


async def test_follow_from_an_offset_or_a_tail_and_across_a_rotation(node: Node) -> None:
    node.running.add("a2")
    node.write("a2", b"0123456789")
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{node.url}/logs/a2/stdout?follow=1&tail=4", headers=MASTER) as resp:
            reader = Reader(resp)
            assert await reader.until(b"6789") == b"6789" and resp.headers["X-Log-Offset"] == "6"
            logcap.cap([node.log("a2")], 5)  # 01234 dropped, 56789 the chunk before
            node.write("a2", b"abc")
            await reader.until(b"abc")
            assert reader.got == b"6789abc"
        async with http.get(f"{node.url}/logs/a2/stdout?follow=1&offset=2", headers=MASTER) as resp:
            assert resp.headers["X-Log-Offset"] == "5"  # what was asked for is dropped: from what is kept
            reader = Reader(resp)
            await reader.until(b"56789abc")
            node.running.discard("a2")
            assert await resp.content.read() == b""


async def test_follow_of_an_attempt_that_ended_serves_its_log_and_ends(node: Node) -> None:
    node.write("a1", b"done\n")
    async with aiohttp.ClientSession() as http, http.get(f"{node.url}/logs/a1/stdout?follow=1",
                                                         headers=MASTER) as resp:
        assert await resp.read() == b"done\n"


async def test_follow_refuses_an_offset_that_is_not_a_number(node: Node) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{node.url}/logs/a1/stdout?follow=1&offset=-1",
                                                         headers=MASTER) as resp:
        assert resp.status == 400 and (await resp.json())["code"] == "InvalidParametersError"


async def test_closing_the_server_ends_its_followers(tmp_path: Path) -> None:
    paths = AgentPaths(tmp_path)
    paths.attempt("a1").mkdir(parents=True)
    server = LogServer(paths, "127.0.0.1", 0, TOKEN, running=lambda attempt: True)  # runs for ever
    url = f"http://127.0.0.1:{await server.start()}/logs/a1/stdout?follow=1"
    async with aiohttp.ClientSession() as http, http.get(url, headers=MASTER) as resp:
        closing = asyncio.create_task(server.close())  # would wait for the follower (60 s) if it went on
        await asyncio.wait_for(resp.read(), WAIT_SECONDS)
        await asyncio.wait_for(closing, WAIT_SECONDS)
