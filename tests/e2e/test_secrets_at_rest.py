"""A job's secrets at rest, end to end (real master and agent processes, SQLite and PostgreSQL, umask 022): they
reach the job's task, and neither the master's data directory (database, WAL, every file) nor the PostgreSQL rows hold
one of their values in clear; the data directory is 0700 and its files 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, inspect, text

from pai.store.db import normalize_url
from tests.dbkit import BACKENDS, database_url
from tests.e2e.harness import Cluster, cluster

pytestmark = pytest.mark.e2e

TOKEN, PASSWORD = "e2e-tok-71c3a9f0", "e2e-pw-0b8d2e64"
JOB = f"""
protocolVersion: 2
name: sealed
type: job
prerequisites:
  - type: dockerimage
    name: img
    uri: busybox
    auth: {{username: bot, password: "<% $secrets.pw %>", registryuri: registry.example:5000}}
secrets:
  token: {TOKEN}
  pw: {PASSWORD}
taskRoles:
  worker:
    instances: 1
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0}}
    commands:
      - echo "rendered=<% $secrets.token %>"
      - echo "file=$(cat "$PAI_SECRET_DIR/pw")"
"""


@pytest.fixture(scope="module", params=BACKENDS)
def sealed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    tmp = tmp_path_factory.mktemp(f"sealed-{request.param}")
    old = os.umask(0o022)  # the master and the agent inherit it
    try:
        with database_url(request.param, tmp) as url:
            in_data_dir = request.param == "sqlite"  # pai master's default: SQLite in its data directory
            with cluster(tmp, None if in_data_dir else url, [("node-a", "127.0.0.2", 2)]) as c:
                key = c.submit(JOB, "text/yaml")
                c.wait_state(key, {"SUCCEEDED", "FAILED"})
                yield c, f"sqlite:///{tmp / 'master' / 'pai.db'}" if in_data_dir else url
    finally:
        os.umask(old)


def test_the_secrets_reach_the_task(sealed: tuple[Cluster, str]) -> None:
    c, _ = sealed
    detail = c.job("admin~sealed")
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    assert c.log("admin~sealed", "worker", 0).splitlines() == [f"rendered={TOKEN}", f"file={PASSWORD}"]
    status, config = c.raw("GET", "/api/v2/jobs/admin~sealed/config", token="default")
    assert status == 200 and TOKEN not in str(config) and "******" in str(config)


def test_no_secret_value_is_in_the_data_dir_or_the_database(sealed: tuple[Cluster, str]) -> None:
    c, url = sealed
    files = [p for p in (c.tmp / "master").rglob("*") if p.is_file()]
    assert any(p.name == "secret-key" for p in files)
    assert {str(p): v for p in files for v in (TOKEN, PASSWORD) if v.encode() in p.read_bytes()} == {}
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            rows = [repr(tuple(row)) for name in inspect(conn).get_table_names()
                    for row in conn.execute(text(f'SELECT * FROM "{name}"'))]
    finally:
        engine.dispose()
    assert any("admin" in r and "sealed" in r and "busybox" in r for r in rows)  # the job's row is read whole
    assert [r for r in rows if TOKEN in r or PASSWORD in r] == []


def test_the_data_dir_is_private_under_umask_022(sealed: tuple[Cluster, str]) -> None:
    c, url = sealed
    data = c.tmp / "master"
    modes = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in data.iterdir() if p.is_file()}
    expected = {"secret-key"} | ({"pai.db", "pai.db-wal", "pai.db-shm"} if url.startswith("sqlite") else set())
    assert expected <= set(modes)
    assert oct(stat.S_IMODE(data.stat().st_mode)) == oct(0o700)
    assert modes == dict.fromkeys(modes, oct(0o600))
