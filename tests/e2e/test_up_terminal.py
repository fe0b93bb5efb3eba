"""What ``pai up`` says on the terminal (the URL, the password, the runtime, the log file: the master's and the
agent's lines go to the log), that it notices its master or agent dying, and the exit codes of the waits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.harness import free_port, processes_with
from tests.eventually import eventually

READY = "The CLI is logged in as admin. Ctrl-C stops everything."


def _job(name: str, command: str) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": command}]})


@dataclass
class Up:
    proc: subprocess.Popen[bytes]
    home: Path
    data: Path
    port: int

    def out(self) -> str:
        return (self.home / "up.out").read_text()

    def err(self) -> str:
        return (self.home / "up.err").read_text()

    def children(self) -> dict[str, int]:
        """``{"master": pid, "agent": pid}``: the processes ``pai up`` started."""
        pids = (Path("/proc") / str(self.proc.pid) / "task" / str(self.proc.pid) / "children").read_text().split()
        found = {}
        for pid in pids:
            argv = (Path("/proc") / pid / "cmdline").read_bytes().split(b"\0")
            found[argv[argv.index(b"pai") + 1].decode()] = int(pid)  # python [-P] -m pai <command> ...
        return found

    def pai(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pai", *args], capture_output=True, text=True, timeout=timeout,
                              env=_env(self.home), cwd=self.home)


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None  # gone meanwhile


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "PAI_DATA_DIR": str(home / "unused")}


@pytest.fixture
async def up(tmp_path: Path) -> AsyncIterator[Up]:
    port, data = free_port(), tmp_path / "data"
    with (tmp_path / "up.out").open("wb") as out, (tmp_path / "up.err").open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "pai", "up", "--port", str(port), "--data-dir", str(data),
                                 "--runtime", "process"], stdout=out, stderr=err, env=_env(tmp_path), cwd=tmp_path)
    running = Up(proc, tmp_path, data, port)
    try:
        await eventually(lambda: READY in running.out() or proc.poll() is not None, timeout=60, what="pai up ready")
        assert proc.poll() is None, running.out() + running.err()
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


async def test_pai_up_prints_the_url_password_runtime_and_log_file_and_nothing_else(up: Up) -> None:
    password = (up.data / "up-credentials").read_text().split()[0]
    assert up.out().splitlines() == [
        "runtime: process (asked for): tasks run as processes on this machine; images are not used",
        f"logs: {up.data / 'up.log'} (pai up -v: here too)",
        f"pai is up at http://127.0.0.1:{up.port}",
        "  user: admin",
        f"  password: {password}",
        READY,
    ]
    assert up.err() == ""  # no INFO line of the master or the agent: they are in the log
    log = (up.data / "up.log").read_text()
    assert " INFO alembic.runtime.migration Running upgrade" in log and "agent registered node=local" in log
    up.proc.send_signal(signal.SIGTERM)
    assert up.proc.wait(timeout=60) == 0
    assert up.out().endswith("stopping...\n")
    assert processes_with(str(up.data)) == []


async def test_pai_submit_wait_exits_0_succeeded_1_failed_124_timed_out(up: Up) -> None:
    for name, command in (("ok", "true"), ("fails", "exit 3"), ("sleeps", "sleep 600")):
        (up.home / f"{name}.json").write_text(_job(name, command))
    assert up.pai("submit", "ok.json", "--wait", "--interval", "0.2").returncode == 0
    failed = up.pai("submit", "fails.json", "--wait", "--interval", "0.2")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "FAILED" in failed.stdout
    timed_out = up.pai("submit", "sleeps.json", "--wait", "--timeout", "1", "--interval", "0.2")
    assert timed_out.returncode == 124, timed_out.stdout + timed_out.stderr
    assert "error: job admin~sleeps is still " in timed_out.stderr and " after 1s" in timed_out.stderr


@pytest.mark.parametrize("child", ["master", "agent"])
async def test_pai_up_exits_3_with_the_logs_tail_when_its_master_or_agent_dies(up: Up, child: str) -> None:
    pids = up.children()
    assert pids.keys() == {"master", "agent"}
    os.kill(pids[child], signal.SIGKILL)
    await eventually(lambda: up.proc.poll() is not None, timeout=10, what="pai up to exit")
    assert up.proc.returncode == 3
    err = up.err()
    assert err.startswith(f"error: the {child} of pai up (pid {pids[child]}) was killed by SIGKILL; everything is "
                          f"stopped. The last lines of {up.data / 'up.log'}:\n"), err
    assert "  20" in err and " INFO pai." in err  # the log's own lines, indented
    # The other one was stopped. A SIGKILLed agent's fencing watchdog outlives it by design, until its lease ends.
    left = [argv for argv in map(_cmdline, processes_with(str(up.data))) if argv and b"pai.nodeagent.fence" not in argv]
    assert left == []


@pytest.mark.parametrize(("command", "extra", "code", "said"), [
    pytest.param("exit 3", [], 1, "admin~job: FAILED", id="failed"),
    pytest.param("sleep 600", ["--timeout", "1"], 124, "error: job admin~job is still ", id="timed-out"),
    pytest.param("true", ["-v"], 0, " INFO pai.launcher agent registered node=local", id="verbose-succeeded"),
])
def test_pai_up_run_exits_0_succeeded_1_failed_124_timed_out_and_shows_the_log_with_v(
        tmp_path: Path, command: str, extra: list[str], code: int, said: str) -> None:
    (tmp_path / "job.json").write_text(_job("job", command))
    r = subprocess.run([sys.executable, "-m", "pai", "up", "--run", str(tmp_path / "job.json"), "--runtime", "process",
                        "--data-dir", str(tmp_path / "data"), *extra],
                       capture_output=True, text=True, timeout=120, env=_env(tmp_path), cwd=tmp_path)
    assert r.returncode == code, r.stdout + r.stderr
    assert said in r.stdout + r.stderr
    assert (" INFO " in r.stderr) == ("-v" in extra) and " INFO " not in r.stdout
    assert processes_with(str(tmp_path / "data")) == []


def test_pai_up_help_lists_its_exit_codes(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "pai", "up", "--help"], capture_output=True, text=True, timeout=60,
                       env=_env(tmp_path))
    lines = [line.strip() for line in r.stdout.splitlines()]
    for code in ("0    stopped with Ctrl-C", "1    with --run: the job ended otherwise",
                 "3    the master or the agent died", "124  with --run: --timeout ran out"):
        assert any(line.startswith(code) for line in lines), r.stdout
