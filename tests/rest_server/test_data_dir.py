"""The master's data directory: 0700, every file in it 0600 whatever the umask; no secret value in it in clear; a
master whose secret key is not the database's refuses to start."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig
from pai.store.keyring import KEY_ENV, Keyring, SecretKeyError
from tests.filemodes import mode
from tests.store.secretjobs import SECRET_JOB, SECRET_VALUES

Client = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]
PASSWORD = "admin-pass-1"
PRIVATE_FILES = {"pai.db", "pai.db-wal", "pai.db-shm", "agent-token", "secret-key"}


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


def config(data_dir: Path, secret_key: str | None = None) -> MasterConfig:
    return MasterConfig(data_dir=data_dir, admin_password=PASSWORD, tick_seconds=0.05,  # SQLite in data_dir
                        secret_key=secret_key)


async def submit_secret_job(client: TestClient[Any, Any], name: str = "secret") -> None:
    login = await client.post("/api/v2/authn/basic/login", json={"username": "admin", "password": PASSWORD})
    token = (await login.json())["token"]
    body = SECRET_JOB.replace("JOB_NAME", name).replace("TOKEN_VALUE", SECRET_VALUES[0]).replace(
        "PASSWORD_VALUE", SECRET_VALUES[1])
    resp = await client.post("/api/v2/jobs", data=body, headers={"Authorization": f"Bearer {token}",
                                                                  "Content-Type": "text/yaml"})
    assert resp.status == 202, await resp.text()
    config = await client.get(f"/api/v2/jobs/admin~{name}/config", headers={"Authorization": f"Bearer {token}"})
    assert "******" in await config.text() and SECRET_VALUES[0] not in await config.text()


async def test_the_data_dir_is_private_and_holds_no_secret_in_clear(
        tmp_path: Path, aiohttp_client: Client, umask_022: None) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    for name in ("pai.db", "agent-token"):  # left wide by an older version
        (data / name).write_text("" if name == "pai.db" else "an-agent-token-of-before\n")
        (data / name).chmod(0o644)
    client = await aiohttp_client(make_app(config(data)))
    await submit_secret_job(client)
    files = {p.name: p for p in data.iterdir() if p.is_file()}
    assert set(files) >= PRIVATE_FILES
    assert mode(data) == 0o700
    assert {name: oct(mode(p)) for name, p in files.items()} == {name: oct(0o600) for name in files}
    found = {name: [v for v in SECRET_VALUES if v.encode() in p.read_bytes()] for name, p in files.items()}
    assert {name: values for name, values in found.items() if values} == {}
    assert any(b"registry.example:5000/train" in p.read_bytes() for p in files.values())  # the job is in them


async def test_a_master_with_another_key_refuses_to_start(tmp_path: Path, aiohttp_client: Client) -> None:
    client = await aiohttp_client(make_app(config(tmp_path / "data", Keyring.generate().keys[0])))
    await submit_secret_job(client)
    await client.close()
    with pytest.raises(SecretKeyError, match=f"the secret key from {KEY_ENV} does not open the secrets sealed"):
        await aiohttp_client(make_app(config(tmp_path / "data", Keyring.generate().keys[0])))
    # nor does a master with no key make one for a database a key has sealed
    with pytest.raises(SecretKeyError, match="this database's secrets were sealed with a key"):
        await aiohttp_client(make_app(config(tmp_path / "data")))
    assert not (tmp_path / "data" / "secret-key").exists()
