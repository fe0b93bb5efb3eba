"""Following a log as it is written: ``GET /logs/{attempt_id}/{stream}?follow=1[&offset=N|&tail=N]``.

The answer is chunked text/plain: the log from offset ``N`` in everything the task wrote to it (``logcap.written``;
offsets stay good across the size cap's rotations), or its last ``N`` bytes, or all that is kept; then what is
appended, as it is written, until the attempt has ended (``running`` says it no longer runs: exited, or unknown to
this node) and the log is read to its end; then the answer ends. It ends too when the reader goes away or the
server closes (``closing``). ``X-Log-Offset`` is the offset its first byte has
(later than asked when the cap dropped what was asked for): a reader that lost the connection asks again from the
offset it got to.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from pai.nodeagent import logcap

POLL_SECONDS = 0.2  # how often a followed log is looked at for more
CHUNK = 256 * 1024  # the most one read takes (then it reads again at once)
Running = Callable[[str], bool]  # whether this node still runs an attempt


def start_offset(path: Path, offset: int | None, tail: int | None) -> int:
    """Where a follow starts: ``offset``, or ``tail`` bytes before the end, or what is kept."""
    if offset is not None:
        return offset
    end = logcap.written(path)
    if tail is not None:
        return max(0, end - tail)
    return max(0, end - logcap.size(path))


def _gone(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


async def follow(request: web.Request, attempt_id: str, path: Path, running: Running, offset: int,
                 headers: dict[str, str], closing: asyncio.Event) -> web.StreamResponse:
    first = await asyncio.to_thread(logcap.read_from, path, offset, CHUNK)
    response = web.StreamResponse(headers={**headers, "X-Log-Offset": str(first.start)})
    response.enable_chunked_encoding()
    await response.prepare(request)
    read: logcap.Read | None = first
    at = first.start
    while True:
        ended = not running(attempt_id)  # looked at before the read: a read after the end sees all of it
        while True:
            if read is None:
                read = await asyncio.to_thread(logcap.read_from, path, at, CHUNK)
            if read.data:
                await response.write(read.data)
            at, done = read.next, not read.data or read.next >= read.end
            read = None
            if done:
                break
        if ended or _gone(request):
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(closing.wait(), POLL_SECONDS)
        if closing.is_set():
            break
    if not _gone(request):
        await response.write_eof()
    return response
