"""A real aiohttp server on 127.0.0.1 that answers with canned replies and records every request."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    raw_path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Canned:
    status: int
    body: bytes
    content_type: str


@dataclass
class FakeMaster:
    """Replies are queued per (method, path); the last reply of a queue repeats."""

    url: str = ""
    requests: list[Recorded] = field(default_factory=list)
    _replies: dict[tuple[str, str], deque[Canned]] = field(default_factory=dict)

    def reply(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        status: int = 200,
        text: str | None = None,
        content_type: str | None = None,
    ) -> None:
        if text is not None:
            canned = Canned(status, text.encode(), content_type or "text/plain")
        else:
            canned = Canned(status, json.dumps(body).encode(), content_type or "application/json")
        self._replies.setdefault((method, path), deque()).append(canned)

    def error(self, method: str, path: str, status: int, code: str, message: str) -> None:
        self.reply(method, path, {"code": code, "message": message}, status=status)

    def reset(self) -> None:
        self.requests.clear()
        self._replies.clear()

    def only(self, method: str, path: str) -> Recorded:
        hits = [r for r in self.requests if r.method == method and r.path == path]
        assert len(hits) == 1, f"{method} {path} was requested {len(hits)} times: {self.requests}"
        return hits[0]

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(
            Recorded(
                request.method,
                request.path,
                request.raw_path.split("?")[0],
                dict(request.query),
                dict(request.headers),
                await request.read(),
            )
        )
        queue = self._replies.get((request.method, request.path))
        if not queue:
            body = {"code": "NotFoundError", "message": f"no canned reply for {request.method} {request.path}"}
            return web.json_response(body, status=404)
        canned = queue.popleft() if len(queue) > 1 else queue[0]
        return web.Response(status=canned.status, body=canned.body, content_type=canned.content_type)


class ServerThread:
    """Runs the fake master's event loop in a thread, since the CLI under test blocks on urllib."""

    def __init__(self, master: FakeMaster) -> None:
        self.master = master
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.runner: web.AppRunner | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self.ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.master.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        host, port = self.runner.addresses[0][:2]
        self.master.url = f"http://{host}:{port}"

    def start(self) -> None:
        self.thread.start()
        assert self.ready.wait(10), "fake master did not start"

    def stop(self) -> None:
        assert self.runner is not None
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
