"""``pai master`` behind its read front, as real processes: the front is started again when it ends, ends with
the master even when the master is killed, and both stop cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pai.domain.resources import Resources
from pai.protocol.messages import NodeInfo, RegisterRequest
from tests.rest_server.test_master_memory import PASSWORD, Master, _free_port, _wait_up

JOB = json.dumps({"jobName": "j", "image": "busybox", "taskRoles": [
    {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "true"}]}).encode()


def until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)  # polling for a condition, not a fixed wait


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def front_pids(log: Path) -> list[int]:
    return [int(p) for p in re.findall(r"front[ _]pid[ =](\d+)", log.read_text())]


def answers(master: Master) -> bool:
    try:
        return master.call("GET", "/api/v2/jobs")[0] == 200
    except (urllib.error.URLError, ConnectionError):
        return False


@pytest.fixture
def fronted(tmp_path: Path) -> Iterator[tuple[Master, Path]]:
    port = _free_port()
    log = tmp_path / "master.log"
    env = {**os.environ, "PAI_ADMIN_PASSWORD": PASSWORD, "PAI_LOG_LEVEL": "WARNING", "PAI_MASTER_FRONT": "true"}
    env.pop("PAI_DATABASE_URL", None)
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pai", "master", "--port", str(port), "--data-dir",
                                 str(tmp_path / "data"), "--list-processes", "0"],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    m = Master(proc, f"http://127.0.0.1:{port}")
    try:
        _wait_up(m, log)
        yield m, log
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
        for pid in front_pids(log):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_front_that_ends_is_started_again(fronted: tuple[Master, Path]) -> None:
    master, log = fronted
    assert master.call("POST", "/api/v2/jobs", JOB)[0] == 202
    [first] = front_pids(log)
    os.kill(first, signal.SIGKILL)
    until(lambda: len(front_pids(log)) == 2, "a second front")
    until(lambda: answers(master), "the port to answer again")
    status, jobs = master.call("GET", "/api/v2/jobs")
    assert (status, [j["name"] for j in jobs]) == (200, ["j"])
    assert "the front ended unexpectedly" in log.read_text()


def test_the_front_ends_with_a_killed_master(fronted: tuple[Master, Path]) -> None:
    master, log = fronted
    [front] = front_pids(log)
    master.proc.kill()
    master.proc.wait(timeout=10)
    until(lambda: not alive(front), "the front to end (its watchdog)")


def test_sigterm_stops_both_and_removes_the_socket(fronted: tuple[Master, Path], tmp_path: Path) -> None:
    master, log = fronted
    [front] = front_pids(log)
    assert (tmp_path / "data" / "master.sock").exists()
    master.proc.terminate()
    assert master.proc.wait(timeout=30) == 0, log.read_text()
    assert not alive(front)
    assert not (tmp_path / "data" / "master.sock").exists()


def test_the_agents_port_is_the_master_itself_past_the_front(tmp_path: Path) -> None:
    port, agent_port = _free_port(), _free_port()
    log = tmp_path / "master.log"
    env = {**os.environ, "PAI_ADMIN_PASSWORD": PASSWORD, "PAI_LOG_LEVEL": "WARNING", "PAI_AGENT_TOKEN": "tok"}
    env.pop("PAI_DATABASE_URL", None)
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pai", "master", "--port", str(port), "--agent-port",
                                 str(agent_port), "--data-dir", str(tmp_path / "data"), "--list-processes", "0"],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    public, direct = Master(proc, f"http://127.0.0.1:{port}"), Master(proc, f"http://127.0.0.1:{agent_port}")
    try:
        _wait_up(public, log)
        [front] = front_pids(log)
        os.kill(front, signal.SIGSTOP)  # the front answers nothing now
        try:
            direct.token = "tok"  # the agent token
            node = NodeInfo("n1", "10.0.0.1", Resources(gpu=0, cpu=4, memory_mb=4096))
            body = json.dumps(RegisterRequest(node).to_dict()).encode()
            status, reply = direct.call("POST", "/api/internal/agents/register", body)
            assert status == 200, reply
        finally:
            os.kill(front, signal.SIGCONT)
        public.token = ""
        _wait_up(public, log)
        status, nodes = public.call("GET", "/api/v2/nodes")
        assert (status, [n["name"] for n in nodes]) == (200, ["n1"])  # registered with the master behind the front
    finally:
        proc.terminate()
        proc.wait(timeout=30)
