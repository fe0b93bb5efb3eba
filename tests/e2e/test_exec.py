"""``pai exec`` against a real master and an agent with the process runtime (SQLite, and PostgreSQL with two API
workers): output, exit code and stdin; who may; a task that is not running; the sessions in the job's history; the
per-user limit and the idle timeout; a terminal driven through a real pty, resized."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from pai.protocol import exec_frames as frames
from tests.dbkit import BACKENDS, database_url
from tests.e2e.harness import Cluster, cluster, processes_with, wait_for
from tests.eventually import eventually

ROOT = Path(__file__).resolve().parents[2]
BOB_PASSWORD = "bob-password-e2e"
LIMIT, IDLE = 2, 4.0


@pytest.fixture(scope="module", params=BACKENDS)
def sessions_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp(f"exec-{request.param}")
    limits = ("--max-sessions-per-user", str(LIMIT), "--idle-timeout", str(IDLE))
    with database_url(request.param, tmp) as url, cluster(tmp, url, [("node-a", "127.0.0.2", 4)],
                                                          master_args=limits) as c:
        c.api.create_user({"username": "bob", "password": BOB_PASSWORD})
        yield c


@pytest.fixture(scope="module")
def sleeper(sessions_cluster: Cluster) -> str:
    """A running job of admin's whose task has a variable and a working directory of its own."""
    c = sessions_cluster
    key = c.submit(json.dumps({"jobName": "sleeper", "image": "busybox", "jobEnvs": {"GREETING": "hi-from-the-task"},
                               "taskRoles": [{"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128,
                                              "gpuNumber": 0, "command": "sleep 600"}]}))
    key = key if "~" in key else f"admin~{key}"
    c.wait_state(key, {"RUNNING"})
    return key


def pai(c: Cluster, *args: str, token: str | None = None, user: str = "admin", stdin: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PAI_MASTER_URL": c.url, "PAI_TOKEN": token or str(c.api.http.token), "PAI_USER": user,
           "HOME": str(c.tmp)}
    return subprocess.run([sys.executable, "-m", "pai", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          input=stdin if stdin is not None else "", timeout=120)


def events(c: Cluster, key: str) -> list[dict[str, Any]]:
    status, body = c.raw("GET", f"/api/v2/jobs/{key}/events")
    assert status == 200, body
    return list(body["data"])


def test_exec_streams_output_to_the_right_fds_and_exits_with_the_command_code(sessions_cluster: Cluster,
                                                                            sleeper: str) -> None:
    c = sessions_cluster
    r = pai(c, "exec", sleeper, "--", "sh", "-c", 'echo "$GREETING in $(pwd)"; echo oops >&2; exit 7')
    assert r.returncode == 7, r.stderr
    assert r.stdout.startswith("hi-from-the-task in /")  # the task's environment
    assert r.stderr == "oops\n"
    r = pai(c, "exec", "-i", sleeper, "--", "tr", "a-z", "A-Z", stdin="hello\nworld\n")
    assert (r.returncode, r.stdout) == (0, "HELLO\nWORLD\n"), r.stderr

    found = events(c, sleeper)
    started = [e for e in found if e["kind"] == "exec-started"]
    ended = [e for e in found if e["kind"] == "exec-ended"]
    assert any("sh -c" in e["message"] and e["details"]["user"] == "admin" for e in started), started
    assert any(e["details"]["exitCode"] == 7 and e["details"]["user"] == "admin"
               and e["details"]["detail"].startswith("sh -c") for e in ended), ended


def test_only_the_owner_or_an_admin_may_and_only_in_a_running_task(sessions_cluster: Cluster, sleeper: str) -> None:
    c = sessions_cluster
    bob = MasterApi(HttpClient(c.url, timeout=10)).login("bob", BOB_PASSWORD)["token"]
    r = pai(c, "exec", sleeper, "--", "true", token=bob, user="bob")  # bob may read admin's job, not exec in it
    assert r.returncode == 1 and "ForbiddenUserError" in r.stderr and "may not open exec sessions" in r.stderr
    r = pai(c, "exec", sleeper, "--role", "nosuch", "--", "true")
    assert r.returncode == 1 and "NoTaskRoleError" in r.stderr and "nosuch" in r.stderr

    done = c.submit(json.dumps({"jobName": f"done-{uuid.uuid4().hex[:6]}", "image": "busybox", "taskRoles": [
        {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "true"}]}))
    done = done if "~" in done else f"admin~{done}"
    c.wait_state(done, {"SUCCEEDED"})
    r = pai(c, "exec", done, "--", "true")
    assert r.returncode == 1 and "TaskNotRunningError" in r.stderr and "not running (state SUCCEEDED)" in r.stderr


async def _open(c: Cluster, key: str, argv: tuple[str, ...]) -> tuple[aiohttp.ClientSession, Any]:
    http = aiohttp.ClientSession()
    url = f"{c.url}/api/v2/jobs/{key}/tasks/main/0/exec"
    ws = await http.ws_connect(url, params=frames.exec_query(argv),
                               headers={"Authorization": f"Bearer {c.api.http.token}"})
    return http, ws


async def test_the_limit_and_the_idle_timeout(sessions_cluster: Cluster, sleeper: str) -> None:
    c = sessions_cluster
    marker = f"3{uuid.uuid4().int % 1000}.{uuid.uuid4().int % 1000:03d}"  # sleep 3xx.yyy: this test's processes
    opened = [await _open(c, sleeper, ("sleep", marker)) for _ in range(LIMIT)]
    try:
        await _limit_then_idle(c, sleeper, marker, opened)
    finally:
        for http, _ in opened:
            await http.close()


async def _limit_then_idle(c: Cluster, sleeper: str, marker: str, opened: list[tuple[aiohttp.ClientSession, Any]]
                           ) -> None:
    await eventually(lambda: len(processes_with(marker)) == LIMIT, what="both commands running")
    status, body = c.raw("GET", f"/api/v2/jobs/{sleeper}/tasks/main/0/exec?cmd=true")  # what an upgrade would get
    assert (status, body["code"]) == (429, "TooManySessionsError") and f"max_sessions_per_user {LIMIT}" in \
        body["message"]
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await _open(c, sleeper, ("true",))
    assert refused.value.status == 429

    # nobody types: each session is closed, with an error frame saying why, and its command killed on the node
    for _, ws in opened:
        msg = await ws.receive(timeout=IDLE * 5)
        assert msg.type is aiohttp.WSMsgType.TEXT, msg
        control = frames.decode_control(msg.data)
        assert isinstance(control, frames.Error) and control.code == "SessionIdleError", control
        assert f"{IDLE:g} s" in control.message
        assert (await ws.receive(timeout=IDLE * 5)).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    await eventually(lambda: not processes_with(marker), what="the idle sessions' commands killed")
    ended = [e for e in events(c, sleeper) if e["kind"] == "exec-ended" and marker in e["details"]["detail"]]
    assert len(ended) == LIMIT and all("no traffic" in e["details"]["reason"] for e in ended), ended
    r = pai(c, "exec", sleeper, "--", "true")  # room again
    assert r.returncode == 0, r.stderr


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _read_until(fd: int, wanted: bytes, seen: bytearray, timeout: float = 30.0) -> bytes:
    def more() -> bool:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen.extend(os.read(fd, 4096))
            except OSError:  # the child has gone: its side of the pty is closed
                return True
        return wanted in seen

    wait_for(f"{wanted!r} on the terminal", more, timeout, interval=0)
    return bytes(seen)


def test_a_terminal_through_a_real_pty_with_a_resize(sessions_cluster: Cluster, sleeper: str) -> None:
    c = sessions_cluster
    env = {**os.environ, "PAI_MASTER_URL": c.url, "PAI_TOKEN": str(c.api.http.token), "PAI_USER": "admin",
           "HOME": str(c.tmp), "TERM": "xterm"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: `pai exec -it` on the pty as its controlling terminal
        os.chdir(ROOT)
        os.execvpe(sys.executable, [sys.executable, "-m", "pai", "exec", "-it", sleeper, "--", "sh"], env)
    try:
        _set_size(fd, 30, 100)
        before = termios.tcgetattr(fd)
        seen = bytearray()
        os.write(fd, b"stty size; echo READY\r")
        _read_until(fd, b"30 100", seen)
        _set_size(fd, 41, 123)  # the kernel sends SIGWINCH to pai, which sends a resize frame
        wait_for("the resize to arrive", lambda: (os.write(fd, b"stty size\r"), _read_until(fd, b"\n", seen))
                 and b"41 123" in seen, 30, interval=0.3)
        os.write(fd, b"exit 3\r")
        _, status = os.waitpid(pid, 0)
        pid = 0
        assert os.WEXITSTATUS(status) == 3, bytes(seen)
        assert termios.tcgetattr(fd)[3] & termios.ICANON == before[3] & termios.ICANON != 0  # restored
    finally:
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)


def test_the_session_events_name_who_and_what(sessions_cluster: Cluster, sleeper: str) -> None:
    c = sessions_cluster
    r = pai(c, "exec", sleeper, "--", "sh", "-c", "exit 0")
    assert r.returncode == 0, r.stderr
    ended = [e for e in events(c, sleeper) if e["kind"] == "exec-ended" and e["details"]["detail"] == "sh -c 'exit 0'"]
    assert ended and ended[0]["details"]["exitCode"] == 0 and ended[0]["type"] == "Normal"
    assert "exec session of admin in main[0] ended: exit code 0" in ended[0]["message"]
