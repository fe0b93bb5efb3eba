"""Exec in the process runtime, against real processes: output and exit codes, stdin, the task's environment
(also after an agent restart), a terminal that resizes, and kills that leave nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.nodeagent import process_group
from pai.nodeagent.process_exec import ProcessExec
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.nodeagent.taskexec import AttemptNotRunning, ExecRequest, NoSuchAttempt
from pai.protocol import ContainerStatus
from tests.eventually import eventually
from tests.nodeagent.builders import start_task, wait_status
from tests.nodeagent.conftest import Groups
from tests.nodeagent.execkit import collect, processes_with, read_until


async def running(runtime: ProcessRuntime, tmp_path: Path, groups: Groups, attempt_id: str = "a1",
                  env: dict[str, str] | None = None) -> Path:
    workdir = tmp_path / attempt_id
    await runtime.start(start_task(attempt_id, "sleep 3600", env=env), workdir)
    groups.add(runtime.process_group(attempt_id))
    return workdir


async def test_a_command_gives_its_exit_code_and_keeps_stdout_and_stderr_apart(
        runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> None:
    await running(runtime, tmp_path, groups)
    session = await runtime.exec("a1", ExecRequest(("sh", "-c", "echo out; echo err >&2; echo more; exit 3")))
    try:
        assert await collect(session) == (b"out\nmore\n", b"err\n", 3)
    finally:
        await session.kill()


async def test_stdin_reaches_the_command_and_its_end_ends_it(
        runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> None:
    await running(runtime, tmp_path, groups)
    session = await runtime.exec("a1", ExecRequest(("cat",)))
    try:
        await session.write(b"hello\n")
        assert await read_until(session, b"hello\n") == b"hello\n"
        await session.close_stdin()
        assert await collect(session) == (b"", b"", 0)
    finally:
        await session.kill()


async def test_the_task_environment_and_working_directory_also_after_an_agent_restart(
        runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> None:
    workdir = await running(runtime, tmp_path, groups, env={"FOO": "from the task", "BAR": "task"})
    probe = ExecRequest(("sh", "-c", 'echo "$FOO|$BAR|$PAI_WORK_DIR|$(pwd)"'), env={"BAR": "exec"})
    expected = f"from the task|exec|{workdir}|{workdir}\n".encode()
    session = await runtime.exec("a1", probe)
    assert (await collect(session))[0] == expected
    await session.kill()
    await runtime.close()

    again = await ProcessRuntime.open(tmp_path / "state")  # a new agent re-adopts the running attempt
    try:
        session = await again.exec("a1", probe)
        assert (await collect(session))[0] == expected
        session = await again.exec("a1", ExecRequest(("pwd",), cwd="/"))
        assert (await collect(session))[0] == b"/\n"
    finally:
        await again.close()


async def test_a_terminal_has_the_asked_size_and_follows_a_resize(
        runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> None:
    await running(runtime, tmp_path, groups)
    session = await runtime.exec("a1", ExecRequest(
        ("sh", "-c", 'stty size; echo "term=$TERM"; read line; stty size; exit 7'), tty=True, rows=30, cols=100))
    try:
        first = await read_until(session, b"term=xterm")
        assert b"30 100" in first
        await session.resize(50, 132)
        await session.write(b"go\n")
        assert b"50 132" in await read_until(session, b"50 132")
        _, err, code = await collect(session)
        assert (err, code) == (b"", 7)  # with a terminal everything is stdout
    finally:
        await session.kill()


async def test_the_shell_is_the_default_command(runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> None:
    await running(runtime, tmp_path, groups)
    session = await runtime.exec("a1", ExecRequest((), tty=True))
    try:
        await session.write(b"echo $((6*7))x; exit 4\n")
        await read_until(session, b"42x")
        assert (await collect(session))[2] == 4
    finally:
        await session.kill()


async def test_kill_leaves_no_process_of_the_session(runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> None:
    await running(runtime, tmp_path, groups)
    marker = "7301"  # sleeps of this length are this test's
    script = f"sleep {marker} & setsid sleep {marker} & sleep {marker}"
    for tty in (False, True):
        session = await runtime.exec("a1", ExecRequest(("sh", "-c", script), tty=tty))
        assert isinstance(session, ProcessExec)
        await eventually(lambda: len(processes_with(f"sleep {marker}")) == 3, what="the session's three sleeps")
        await session.kill()
        assert processes_with(f"sleep {marker}") == []
        assert process_group.group_members(session.pid) == []
        assert await session.read() is None
        assert await session.wait() == 137
        await session.kill()  # idempotent
    assert runtime.reports()[0].status is ContainerStatus.RUNNING  # the task itself goes on


async def test_an_attempt_that_ends_takes_its_sessions_along(
        runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> None:
    await running(runtime, tmp_path, groups)
    session = await runtime.exec("a1", ExecRequest(("sleep", "7302")))
    await eventually(lambda: processes_with("sleep 7302"), what="the exec's sleep")
    await runtime.stop("a1", 5)
    await eventually(lambda: not processes_with("sleep 7302"), what="the exec's sleep gone")
    assert await session.read() is None


async def test_unknown_and_ended_attempts_are_refused(runtime: ProcessRuntime, tmp_path: Path) -> None:
    with pytest.raises(NoSuchAttempt):
        await runtime.exec("nosuch", ExecRequest(("true",)))
    await runtime.start(start_task("a2", "exit 0"), tmp_path / "a2")
    await wait_status(runtime, "a2", ContainerStatus.EXITED)
    with pytest.raises(AttemptNotRunning, match="not running"):
        await runtime.exec("a2", ExecRequest(("true",)))
