"""The agent channel: one WebSocket per agent, over which the master pokes it the moment a task of its node
changes, so that starts and stops reach it in milliseconds instead of at its next heartbeat.

The channel carries no command: a poke makes the agent heartbeat at once, and the heartbeat's reply carries
the commands, computed from the agent's own report as always. So the heartbeat stays the one way commands
and reports travel (and the one place they are reconciled); a poke that is lost (the socket dropped, the
agent restarting) costs only the time to the next heartbeat, and an agent that (re)connects is poked at
once, so it converges on what the master wants. Every poke carries the launcher's epoch (``epoch``, read when it
is sent), as the replies do: an agent ignores the pokes of a deposed leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterable

from aiohttp import WSCloseCode, WSMsgType, web

from pai.protocol import Poke

log = logging.getLogger("pai.master.channel")
SEND_TIMEOUT_SECONDS = 2.0
PING_SECONDS = 10.0  # WebSocket pings find a dead peer; the agent's heartbeats are its liveness


class AgentChannels:
    def __init__(self, epoch: Callable[[], int] = lambda: 0) -> None:
        self._sockets: dict[str, set[web.WebSocketResponse]] = {}
        self._epoch = epoch

    async def poke(self, nodes: Iterable[str], reason: str = "changed") -> None:
        """Poke the agents of ``nodes`` that have a channel open, all at once; a slow or dead one is skipped."""
        text = json.dumps(Poke(reason, self._epoch()).to_dict())
        sends = [self._send(node, ws, text) for node in nodes for ws in list(self._sockets.get(node, ()))]
        if sends:
            await asyncio.gather(*sends)

    async def _send(self, node: str, ws: web.WebSocketResponse, text: str) -> None:
        try:
            await asyncio.wait_for(ws.send_str(text), SEND_TIMEOUT_SECONDS)
        except (ConnectionError, RuntimeError, TimeoutError) as e:
            log.info("agent channel send failed node=%s error=%s", node, e or type(e).__name__)

    async def serve(self, request: web.Request) -> web.WebSocketResponse:
        """The channel of the agent of node ``{node}`` (the caller has checked its token)."""
        node = request.match_info["node"]
        ws = web.WebSocketResponse(heartbeat=PING_SECONDS)
        await ws.prepare(request)
        self._sockets.setdefault(node, set()).add(ws)
        log.info("agent channel open node=%s", node)
        try:
            await self._send(node, ws, json.dumps(Poke("connected", self._epoch()).to_dict()))  # converge at once
            async for msg in ws:  # the agent sends nothing; this waits for the close
                if msg.type is WSMsgType.ERROR:
                    break
        finally:
            self._sockets.get(node, set()).discard(ws)
            log.info("agent channel closed node=%s", node)
        return ws

    async def close(self) -> None:
        for sockets in list(self._sockets.values()):
            for ws in list(sockets):
                with contextlib.suppress(Exception):
                    await ws.close(code=WSCloseCode.GOING_AWAY, message=b"master shutting down")
