"""A real aiohttp server playing the master's agent API: records requests, replies with queued commands.

With ``standby`` set it plays a standby master (issue 27): every agent endpoint answers 503 NotLeaderError naming
``leader`` (None: no master leads), as the contract between the master and the agents says."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from aiohttp import web

from pai.protocol import (
    ContainerReport,
    HeartbeatRequest,
    MasterReply,
    Poke,
    RegisterRequest,
    StartTask,
    StopTask,
)
from pai.protocol.members import JobMembers


@dataclass
class FakeMaster:
    heartbeat_seconds: float = 0.1
    node_timeout_seconds: float = 30.0
    fence_grace_seconds: float = 5.0
    refuse_heartbeats: int = 0  # answer this many heartbeats 404 NoNodeError, as a restarted master would
    epoch: int = 0  # the launcher's, on every reply and poke (0: unfenced)
    members: tuple[JobMembers, ...] = ()  # elastic jobs' membership, on every reply
    standby: bool = False  # answer every agent endpoint 503 NotLeaderError naming ``leader``
    leader: str | None = None
    refused: int = 0  # requests answered NotLeaderError (channels included)
    registers: list[RegisterRequest] = field(default_factory=list)
    heartbeats: list[HeartbeatRequest] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    requests: list[RegisterRequest | HeartbeatRequest] = field(default_factory=list)
    _queued: deque[tuple[StartTask | StopTask, ...]] = field(default_factory=deque)
    _runner: web.AppRunner | None = None
    _channels: list[web.WebSocketResponse] = field(default_factory=list)
    url: str = ""

    async def poke(self) -> int:
        """Poke every agent channel open now; returns how many."""
        for ws in self._channels:
            await ws.send_json(Poke(epoch=self.epoch).to_dict())
        return len(self._channels)

    def lead(self, epoch: int) -> None:
        """Become the leader with ``epoch`` (a standby that took the lease)."""
        self.standby, self.leader, self.epoch = False, None, epoch

    def step_down(self, leader: str | None) -> None:
        """Become a standby naming ``leader``. Channels already open stay open: the agent must leave them."""
        self.standby, self.leader = True, leader

    def _not_leader(self) -> web.Response:
        self.refused += 1
        where = f"the leader is {self.leader}" if self.leader else "no master leads right now"
        return web.json_response({"code": "NotLeaderError", "message": f"this master is a standby; {where}",
                                  "leader": self.leader}, status=503)

    async def _channel(self, request: web.Request) -> web.StreamResponse:
        if self.standby:
            return self._not_leader()
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._channels.append(ws)
        try:
            async for _ in ws:
                pass
        finally:
            self._channels.remove(ws)
        return ws

    def send(self, *commands: StartTask | StopTask) -> None:
        """Commands for the next reply (register or heartbeat)."""
        self._queued.append(commands)

    def latest(self, attempt_id: str) -> ContainerReport | None:
        """The attempt as the most recent request (register or heartbeat) reported it."""
        if not self.requests:
            return None
        return next((c for c in self.requests[-1].containers if c.attempt_id == attempt_id), None)

    def _reply(self) -> web.Response:
        commands = self._queued.popleft() if self._queued else ()
        reply = MasterReply(commands, self.heartbeat_seconds, self.node_timeout_seconds, self.fence_grace_seconds,
                            self.epoch, self.members)
        return web.json_response(reply.to_dict())

    async def _register(self, request: web.Request) -> web.Response:
        if self.standby:
            return self._not_leader()
        self.authorizations.append(request.headers.get("Authorization"))
        self.registers.append(RegisterRequest.from_dict(await request.json()))
        self.requests.append(self.registers[-1])
        return self._reply()

    async def _heartbeat(self, request: web.Request) -> web.Response:
        if self.standby:
            return self._not_leader()
        self.authorizations.append(request.headers.get("Authorization"))
        heartbeat = HeartbeatRequest.from_dict(await request.json())
        assert heartbeat.node == request.match_info["node"]
        if self.refuse_heartbeats > 0:
            self.refuse_heartbeats -= 1
            return web.json_response({"code": "NoNodeError", "message": "node is not registered"}, status=404)
        self.heartbeats.append(heartbeat)
        self.requests.append(heartbeat)
        return self._reply()

    async def start(self, port: int = 0) -> str:
        app = web.Application()
        app.router.add_post("/api/internal/agents/register", self._register)
        app.router.add_post("/api/internal/agents/{node}/heartbeat", self._heartbeat)
        app.router.add_get("/api/internal/agents/{node}/channel", self._channel)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self.url

    async def close(self) -> None:
        for ws in list(self._channels):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
