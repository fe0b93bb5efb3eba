from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from sqlalchemy.orm import Session

from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig
from pai.rest_server.keys import DB, STORE, VCADMIN
from pai.store import credentials
from tests.dbkit import BACKENDS, database_url

ADMIN_PASSWORD = "admin-password"
AGENT_TOKEN = "agent-token"
T = TypeVar("T")


@pytest.fixture(autouse=True)
def cheap_scrypt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real scrypt, at a cost that keeps the suite fast."""
    monkeypatch.setattr(credentials, "DEFAULT_PARAMS", credentials.ScryptParams(n=2**4, r=8, p=1))


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database_url(request.param, tmp_path) as url:
        yield url


class Api:
    """A test client that logs in and speaks JSON."""

    def __init__(self, client: TestClient[Any, Any]) -> None:
        self.client = client
        self.token: str | None = None

    async def login(self, user: str = "admin", password: str = ADMIN_PASSWORD) -> str:
        resp = await self.client.post("/api/v2/authn/basic/login", json={"username": user, "password": password})
        assert resp.status == 200, await resp.text()
        token = (await resp.json())["token"]
        self.token = token
        return str(token)

    async def write(self, fn: Callable[[Session], T]) -> T:
        """``fn`` in a transaction of the app's store, on its writer thread: where the master writes, so that a
        test's write never races the launcher's (on SQLite two writing threads fail each other's transactions)."""
        db = self.client.app[DB]

        def run() -> T:
            with db.session() as s:
                return fn(s)

        return await self.client.app[STORE].call(run)

    async def apply_config(self, doc: dict[str, Any]) -> None:
        """The cluster configuration ``doc`` applied on the app's writer thread (see ``write``)."""
        vcadmin = self.client.app[VCADMIN]
        await self.client.app[STORE].call(lambda: vcadmin.apply_file(doc))

    def headers(self, extra: dict[str, str] | None = None, token: str | None = None) -> dict[str, str]:
        h = dict(extra or {})
        tok = token or self.token
        if tok:
            h["Authorization"] = f"Bearer {tok}"
        return h

    async def call(self, method: str, path: str, *, body: bytes | str | None = None, json_body: Any = None,
                   content_type: str | None = None, token: str | None = None) -> tuple[int, Any]:
        headers = self.headers({"Content-Type": content_type} if content_type else None, token)
        resp = await self.client.request(method, path, data=body, json=json_body, headers=headers)
        if resp.content_type == "application/json":
            return resp.status, await resp.json()
        return resp.status, await resp.text()


@pytest.fixture
async def api(db_url: str, tmp_path: Path,
              aiohttp_client: Callable[[web.Application], Awaitable[TestClient[Any, Any]]]) -> AsyncIterator[Api]:
    # db_url comes first so that it is torn down last, after the app has closed its connections.
    config = MasterConfig(data_dir=tmp_path / "data", database_url=db_url, admin_password=ADMIN_PASSWORD,
                          agent_token=AGENT_TOKEN, tick_seconds=0.05)
    client = await aiohttp_client(make_app(config))
    a = Api(client)
    await a.login()
    yield a
