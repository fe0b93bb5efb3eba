"""The agent API is never open: without PAI_AGENT_TOKEN the master makes a token once and keeps it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig

REGISTER = {"version": 1, "node": {"name": "n1", "address": "127.0.0.9",
                                   "resources": {"gpu": 0, "cpu": 2, "memoryMB": 1024}}}
Client = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]


async def _register(client: TestClient[Any, Any], token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    resp = await client.post("/api/internal/agents/register", json=REGISTER, headers=headers)
    body = await resp.json()
    assert set(body) >= ({"code", "message"} if resp.status != 200 else set())
    return resp.status


async def test_a_master_without_a_configured_token_makes_one_and_refuses_agents_without_it(
        tmp_path: Path, aiohttp_client: Client) -> None:
    config = MasterConfig(data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'pai.db'}",
                          tick_seconds=0.05)
    client = await aiohttp_client(make_app(config))
    path = tmp_path / "data" / "agent-token"
    token = path.read_text().strip()
    assert len(token) >= 32 and path.stat().st_mode & 0o777 == 0o600
    assert await _register(client, None) == 401
    assert await _register(client, "guess") == 401
    assert await _register(client, token) == 200
    await client.close()

    again = await aiohttp_client(make_app(config))  # a restart keeps the token its agents have
    assert path.read_text().strip() == token
    assert await _register(again, token) == 200


async def test_a_configured_token_wins_and_no_file_is_written(tmp_path: Path, aiohttp_client: Client) -> None:
    config = MasterConfig(data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'pai.db'}",
                          agent_token="from-the-environment", tick_seconds=0.05)
    client = await aiohttp_client(make_app(config))
    assert await _register(client, "from-the-environment") == 200
    assert not (tmp_path / "data" / "agent-token").exists()
