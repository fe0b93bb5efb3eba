"""Exec in the docker runtime against a real Docker Engine (tests/dockerkit.py): output and exit codes, stdin,
the container's environment, a terminal that resizes, and kills that leave nothing behind in the container."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from pai.domain.resources import Resources
from pai.nodeagent.docker_runtime import DockerRuntime
from pai.nodeagent.taskexec import AttemptNotRunning, ExecRequest, NoSuchAttempt
from pai.protocol import ContainerStatus
from tests.dockerkit import IMAGE
from tests.eventually import eventually
from tests.nodeagent.builders import start_task, wait_status
from tests.nodeagent.execkit import collect, processes_with, read_until


@pytest.fixture
async def runtime(tmp_path: Path, docker_host: str) -> AsyncIterator[DockerRuntime]:
    rt = await DockerRuntime.open(tmp_path / "state", base_url=docker_host)
    yield rt
    for report in rt.reports():
        if report.status is ContainerStatus.RUNNING:
            await rt.stop(report.attempt_id, 0)
    await rt.close()


async def running(rt: DockerRuntime, tmp_path: Path, attempt_id: str, command: str = "sleep 3600") -> None:
    cmd = replace(start_task(attempt_id, command, env={"PAI_JOB_NAME": "alice~job", "BAR": "task"}), image=IMAGE,
                  resources=Resources(0, 1, 64))
    await rt.start(cmd, tmp_path / attempt_id)
    await wait_status(rt, attempt_id, ContainerStatus.RUNNING)


async def test_a_command_runs_in_the_container_with_its_environment(runtime: DockerRuntime, tmp_path: Path) -> None:
    await running(runtime, tmp_path, "e1")
    session = await runtime.exec("e1", ExecRequest(
        ("sh", "-c", 'echo "$PAI_JOB_NAME|$BAR|$(pwd)"; echo err >&2; ls /pai/log; exit 3'), env={"BAR": "exec"}))
    try:
        assert await collect(session) == (b"alice~job|exec|/pai/work\nstderr.log\nstdout.log\n", b"err\n", 3)
    finally:
        await session.kill()
    session = await runtime.exec("e1", ExecRequest(("pwd",), cwd="/tmp"))
    assert await collect(session) == (b"/tmp\n", b"", 0)
    await session.kill()


async def test_stdin_reaches_the_command_and_its_end_ends_it(runtime: DockerRuntime, tmp_path: Path) -> None:
    await running(runtime, tmp_path, "e2")
    session = await runtime.exec("e2", ExecRequest(("cat",)))
    try:
        await session.write(b"hello\n" * 20000)  # more than a frame and more than the socket's buffers
        await session.close_stdin()
        out, err, code = await collect(session)
        assert (len(out), out[:6], err, code) == (120000, b"hello\n", b"", 0)
    finally:
        await session.kill()


async def test_a_terminal_has_the_asked_size_and_follows_a_resize(runtime: DockerRuntime, tmp_path: Path) -> None:
    await running(runtime, tmp_path, "e3")
    session = await runtime.exec("e3", ExecRequest(
        ("sh", "-c", 'echo "term=$TERM"; read line; stty size; read line; stty size; exit 7'), tty=True, rows=30,
        cols=100))
    try:  # engines before API 1.42 set the size just after the start: the first size is asked once we are there
        await read_until(session, b"term=xterm")
        await session.write(b"size\n")
        await read_until(session, b"30 100")
        await session.resize(50, 132)
        await session.write(b"go\n")
        await read_until(session, b"50 132")
        _, err, code = await collect(session)
        assert (err, code) == (b"", 7)
    finally:
        await session.kill()


async def test_kill_leaves_no_process_of_the_session(runtime: DockerRuntime, tmp_path: Path) -> None:
    await running(runtime, tmp_path, "e4")
    marker = "sleep 7401"
    for tty in (False, True):
        session = await runtime.exec("e4", ExecRequest(
            ("sh", "-c", f"{marker} & setsid {marker} & {marker}"), tty=tty))
        try:
            await eventually(lambda: len(processes_with(marker)) == 3, what="the session's three sleeps")
        finally:
            await session.kill()
        assert processes_with(marker) == []
        assert await session.read() is None
        assert await session.wait() == 137
        await session.kill()  # idempotent
    assert runtime.reports()[0].status is ContainerStatus.RUNNING  # the task itself goes on


async def test_a_session_ends_with_its_container(runtime: DockerRuntime, tmp_path: Path) -> None:
    await running(runtime, tmp_path, "e5")
    session = await runtime.exec("e5", ExecRequest(("sleep", "7402")))
    await eventually(lambda: processes_with("sleep 7402"), what="the exec's sleep")
    await runtime.stop("e5", 0)
    assert await collect(session) == (b"", b"", 137)
    assert processes_with("sleep 7402") == []


async def test_unknown_and_ended_attempts_are_refused(runtime: DockerRuntime, tmp_path: Path) -> None:
    with pytest.raises(NoSuchAttempt):
        await runtime.exec("nosuch", ExecRequest(("true",)))
    await running(runtime, tmp_path, "e6", "sleep 3600")
    await runtime.stop("e6", 0)
    with pytest.raises(AttemptNotRunning, match="not running"):
        await runtime.exec("e6", ExecRequest(("true",)))
