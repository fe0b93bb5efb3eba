"""A real ``pai master`` process: specs that ask for absurd sizes are refused without the master's memory growing
(before issue 8, ``taskNumber: 1000000`` was accepted and the master built a million tasks)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PASSWORD = "memory-test"
ROLE = {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "true"}
V2 = ("protocolVersion: 2\nname: big\ntype: job\nprerequisites: [{{name: i, type: dockerimage, uri: busybox}}]\n"
      "taskRoles:\n  w:\n    instances: {}\n    dockerImage: i\n"
      "    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0}}\n    commands: [x]\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Master:
    def __init__(self, proc: subprocess.Popen[bytes], url: str) -> None:
        self.proc, self.url, self.token = proc, url, ""

    def call(self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json",
             ) -> tuple[int, Any]:
        headers = {"Content-Type": content_type, "Authorization": f"Bearer {self.token}"}
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


def _wait_up(master: Master, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert master.proc.poll() is None, log.read_text()
        try:
            status, body = master.call("POST", "/api/v2/authn/basic/login",
                                       json.dumps({"username": "admin", "password": PASSWORD}).encode())
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)  # polling for the port to open, not a fixed wait
            continue
        assert status == 200, body
        master.token = body["token"]
        return
    raise AssertionError(f"master did not start:\n{log.read_text()}")


@pytest.fixture
def master(tmp_path: Path) -> Iterator[Master]:
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to read the master's memory")
    port = _free_port()
    log = tmp_path / "master.log"
    env = {**os.environ, "PAI_ADMIN_PASSWORD": PASSWORD, "PAI_LOG_LEVEL": "WARNING"}
    env.pop("PAI_DATABASE_URL", None)
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pai", "master", "--port", str(port), "--data-dir",
                                 str(tmp_path / "data")], stdout=out, stderr=subprocess.STDOUT, env=env)
    m = Master(proc, f"http://127.0.0.1:{port}")
    try:
        _wait_up(m, log)
        yield m
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _v1(task_number: str) -> bytes:
    return json.dumps({"jobName": "big", "image": "busybox", "taskRoles": [ROLE]}).replace(
        '"taskNumber": 1', f'"taskNumber": {task_number}').encode()


def test_absurd_sizes_are_refused_without_the_master_growing(master: Master) -> None:
    refused = [
        (_v1("1" + "0" * 400), "application/json"),
        (_v1("1000000"), "application/json"),
        (V2.format("1" + "0" * 400).encode(), "text/yaml"),
        (V2.format("1001").encode(), "text/yaml"),
        (b"[" * 100_000, "application/json"),
    ]
    for body, content_type in refused[:2]:  # warm up: imports and schema validators are built on first use
        assert master.call("POST", "/api/v2/jobs", body, content_type)[0] == 400
    before = master.rss_kib()
    for _ in range(5):
        for body, content_type in refused:
            status, answer = master.call("POST", "/api/v2/jobs", body, content_type)
            assert status == 400 and {"code", "message"} <= set(answer) <= {"code", "message", "line"}, answer
    grown = master.rss_kib() - before
    assert grown < 8 * 1024, f"the master grew by {grown} KiB"
    assert master.call("GET", "/api/v2/jobs?withTotalCount=true")[1]["totalCount"] == 0
