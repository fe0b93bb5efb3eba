"""The users' open WebSockets of this process (tunnels, proxied ones): closed when the process shuts down, which they
would otherwise hold up until aiohttp's shutdown timeout."""

from __future__ import annotations

import weakref

from aiohttp import WSCloseCode, web

SHUTTING_DOWN = "the master is shutting down"


class OpenSockets:
    def __init__(self) -> None:
        self._open: weakref.WeakSet[web.WebSocketResponse] = weakref.WeakSet()
        self.closing = False  # set once the process shuts down: a relay that ends then says so

    def add(self, ws: web.WebSocketResponse) -> None:
        self._open.add(ws)

    async def close_all(self) -> None:
        self.closing = True
        for ws in list(self._open):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=SHUTTING_DOWN.encode())
