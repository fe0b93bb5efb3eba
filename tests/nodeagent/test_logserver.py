"""The log server: full and tail reads, unknown attempts, ids that are not tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from pai.nodeagent.logserver import LogServer
from pai.nodeagent.paths import AgentPaths

LOG = "".join(f"line {i}\n" for i in range(1000))
TOKEN = "the-agent-token"
MASTER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def base_url(tmp_path: Path) -> AsyncIterator[str]:
    paths = AgentPaths(tmp_path)
    paths.attempt("a1").mkdir(parents=True)
    (paths.attempt("a1") / "stdout.log").write_text(LOG)
    (paths.attempt("a1") / "stderr.log").write_text("oops\n")
    paths.attempt("not-started").mkdir()
    server = LogServer(paths, "127.0.0.1", 0, TOKEN)
    port = await server.start()
    assert port == server.port != 0
    yield f"http://127.0.0.1:{port}"
    await server.close()


@pytest.mark.parametrize(
    ("path", "body", "size"),
    [
        pytest.param("/logs/a1/stdout", LOG, len(LOG), id="full"),
        pytest.param("/logs/a1/stdout?tail=16", LOG[-16:], len(LOG), id="tail"),
        pytest.param("/logs/a1/stdout?tail=999999", LOG, len(LOG), id="tail-longer-than-file"),
        pytest.param("/logs/a1/stdout?tail=0", "", len(LOG), id="tail-zero"),
        pytest.param("/logs/a1/stderr", "oops\n", 5, id="stderr"),
        pytest.param("/logs/not-started/stdout", "", 0, id="known-but-no-output-yet"),
        pytest.param("/logs/not-started/stdout?tail=10", "", 0, id="tail-of-no-output"),
    ],
)
async def test_reads(base_url: str, path: str, body: str, size: int) -> None:
    async with aiohttp.ClientSession() as http, http.get(base_url + path, headers=MASTER) as resp:
        assert (resp.status, await resp.text()) == (200, body)
        assert resp.content_type == "text/plain"
        assert resp.headers["X-Log-Size"] == str(size)


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        pytest.param("/logs/nobody/stdout", 404, "NoTaskError", id="unknown-attempt"),
        pytest.param("/logs/a..b/stdout", 400, "InvalidParametersError", id="dotdot-in-id"),
        pytest.param("/logs/.hidden/stdout", 400, "InvalidParametersError", id="hidden-id"),
        pytest.param("/logs/a1/stdout?tail=-5", 400, "InvalidParametersError", id="negative-tail"),
        pytest.param("/logs/a1/stdout?tail=x", 400, "InvalidParametersError", id="non-numeric-tail"),
    ],
)
async def test_refusals(base_url: str, path: str, status: int, code: str) -> None:
    async with aiohttp.ClientSession() as http, http.get(base_url + path, headers=MASTER) as resp:
        assert resp.status == status
        assert (await resp.json())["code"] == code


@pytest.mark.parametrize("path", ["/logs/a1/state", "/logs/..%2F..%2Fetc/stdout", "/logs/%2E%2E/stdout"])
async def test_other_paths_are_not_found(base_url: str, path: str) -> None:
    async with aiohttp.ClientSession() as http, http.get(base_url + path, headers=MASTER) as resp:
        assert resp.status in (400, 404)
        assert "root:" not in await resp.text()


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-token"),
        pytest.param({"Authorization": "Bearer wrong"}, id="wrong-token"),
        pytest.param({"Authorization": f"Basic {TOKEN}"}, id="not-bearer"),
    ],
)
async def test_only_the_master_may_read(base_url: str, headers: dict[str, str]) -> None:
    async with aiohttp.ClientSession() as http, http.get(base_url + "/logs/a1/stdout", headers=headers) as resp:
        assert resp.status == 401
        body = await resp.json()
        assert body["code"] == "UnauthorizedUserError" and "line 0" not in await resp.text()
