"""HTTP to the master: register and heartbeat, JSON bodies, ``Authorization: Bearer <token>``; and the agent
channel, a WebSocket over which the master pokes the agent (pai.protocol.Poke).

One client talks to one master at a time, :attr:`MasterClient.base_url`; the agent points it at another master
when it moves (``masters.py``). A standby answers 503 ``{"code": "NotLeaderError", "leader": URL | null}``:
raised as :class:`NotLeaderError`, which names the leader."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import aiohttp

from pai.protocol import HeartbeatRequest, MasterReply, Poke, ProtocolError, RegisterRequest

DEFAULT_TIMEOUT_SECONDS = 10.0
CHANNEL_PING_SECONDS = 10.0  # WebSocket pings: a master that vanished is noticed within twice this


class MasterUnavailableError(Exception):
    """The master could not be reached, or did not answer in time."""

    def __init__(self, url: str, cause: str) -> None:
        super().__init__(f"master unreachable at {url}: {cause}")
        self.url = url
        self.cause = cause


class MasterRefusedError(Exception):
    """The master answered 4xx/5xx (body ``{code, message}``), or with something not in the protocol."""

    def __init__(self, url: str, status: int, code: str, message: str) -> None:
        super().__init__(f"master refused {url}: {status} {code}: {message}")
        self.url = url
        self.status = status
        self.code = code
        self.message = message


class NotLeaderError(MasterRefusedError):
    """The master is a standby: 503 NotLeaderError, with the leader's URL (None while no master leads)."""

    def __init__(self, url: str, message: str, leader: str | None) -> None:
        super().__init__(url, 503, "NotLeaderError", message)
        self.leader = leader


class MasterClient:
    def __init__(self, base_url: str, token: str | None = None, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._session = aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=timeout))
        # The channel lives as long as the connection: no total timeout, only for connecting.
        self._channel_session = aiohttp.ClientSession(
            headers=headers, timeout=aiohttp.ClientTimeout(total=None, connect=timeout, sock_connect=timeout))

    async def register(self, request: RegisterRequest) -> MasterReply:
        return await self._post("/api/internal/agents/register", request.to_dict())

    async def heartbeat(self, request: HeartbeatRequest) -> MasterReply:
        return await self._post(f"/api/internal/agents/{quote(request.node, safe='')}/heartbeat", request.to_dict())

    async def channel(self, node: str) -> AsyncIterator[Poke]:
        """The master's pokes over the agent channel, until it closes (raises MasterUnavailableError or
        MasterRefusedError when it cannot be opened or breaks)."""
        url = f"{self.base_url}/api/internal/agents/{quote(node, safe='')}/channel"
        try:
            async with self._channel_session.ws_connect(url, heartbeat=CHANNEL_PING_SECONDS) as ws:
                async for msg in ws:
                    if msg.type is not aiohttp.WSMsgType.TEXT:
                        break
                    try:
                        yield Poke.from_dict(json.loads(msg.data))
                    except (ValueError, ProtocolError) as e:
                        raise MasterRefusedError(url, 200, "BadMessage", str(e)) from e
        except aiohttp.WSServerHandshakeError as e:
            raise MasterRefusedError(url, e.status, f"HTTP{e.status}", e.message) from e
        except (aiohttp.ClientError, TimeoutError) as e:
            raise MasterUnavailableError(url, str(e) or type(e).__name__) from e

    async def close(self) -> None:
        await self._session.close()
        await self._channel_session.close()

    async def _post(self, path: str, body: dict[str, Any]) -> MasterReply:
        url = self.base_url + path
        try:
            async with self._session.post(url, json=body) as resp:
                if resp.status >= 400:
                    raise await _error_of(url, resp)
                data = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError) as e:
            raise MasterUnavailableError(url, str(e) or type(e).__name__) from e
        except ValueError as e:  # not JSON
            raise MasterRefusedError(url, 200, "BadReply", f"not JSON: {e}") from e
        try:
            if not isinstance(data, dict):
                raise ProtocolError("the reply is not a JSON object")
            return MasterReply.from_dict(data)
        except (ProtocolError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise MasterRefusedError(url, 200, "BadReply", str(e)) from e


async def _error_of(url: str, resp: aiohttp.ClientResponse) -> MasterRefusedError:
    text = await resp.text()
    try:
        body = await resp.json(content_type=None)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return MasterRefusedError(url, resp.status, f"HTTP{resp.status}", text[:500])
    code, message = str(body.get("code", f"HTTP{resp.status}")), str(body.get("message", text))
    if resp.status == 503 and code == "NotLeaderError":
        leader = body.get("leader")
        return NotLeaderError(url, message, leader if isinstance(leader, str) and leader else None)
    return MasterRefusedError(url, resp.status, code, message)
