"""The process runtime against real processes: codes, environment, logs, stop, re-adoption."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from pai.nodeagent import process_group
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.protocol import ContainerReport, ContainerStatus, PlatformExit
from tests.eventually import eventually
from tests.nodeagent.builders import start_task, wait_status
from tests.nodeagent.conftest import Groups


@pytest.mark.parametrize(
    ("command", "exit_code", "reason"),
    [
        pytest.param("exit 0", 0, None, id="success"),
        pytest.param("exit 3", 3, None, id="user-code"),
        pytest.param("kill -KILL $$", 137, "killed by SIGKILL", id="sigkill-is-128+9"),
        pytest.param("kill -TERM $$", 143, "killed by SIGTERM", id="sigterm-is-128+15"),
    ],
)
async def test_exit_code(
    runtime: ProcessRuntime, tmp_path: Path, command: str, exit_code: int, reason: str | None
) -> None:
    await runtime.start(start_task("a1", command), tmp_path / "a1")
    report = await wait_status(runtime, "a1", ContainerStatus.EXITED)
    assert (report.exit_code, report.reason) == (exit_code, reason)
    assert report.started_at is not None and report.finished_at is not None
    assert (report.job_key, report.role, report.index) == ("alice~job", "worker", 0)


async def test_exit_is_announced_to_the_listener(
    runtime: ProcessRuntime, tmp_path: Path, exits: list[ContainerReport]
) -> None:
    await runtime.start(start_task("a1", "exit 5"), tmp_path / "a1")
    await eventually(lambda: exits, what="exit listener")
    assert [(r.attempt_id, r.status, r.exit_code) for r in exits] == [("a1", ContainerStatus.EXITED, 5)]


async def test_env_is_minimal_base_plus_the_masters(
    runtime: ProcessRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_SECRET", "do-not-leak")
    workdir = tmp_path / "a1"
    cmd = start_task(
        "a1",
        'echo "$FOO|$HOME|$PAI_WORK_DIR|${PAI_CODE_DIR-unset}|$CUDA_VISIBLE_DEVICES|${AGENT_SECRET-unset}|$LANG"',
        env={"FOO": "bar baz"},
        gpus=(1, 3),
    )
    await runtime.start(cmd, workdir)
    await wait_status(runtime, "a1", ContainerStatus.EXITED)
    out = (workdir / "stdout.log").read_text().strip()
    assert out == f"bar baz|{workdir}|{workdir}|unset|1,3|unset|C.UTF-8"


async def test_master_env_wins_over_defaults(runtime: ProcessRuntime, tmp_path: Path) -> None:
    workdir = tmp_path / "a1"
    (workdir / "code").mkdir(parents=True)
    cmd = start_task("a1", 'echo "$PAI_WORK_DIR|$PAI_CODE_DIR|$PWD"', env={"PAI_WORK_DIR": "/master/says"})
    await runtime.start(cmd, workdir)
    await wait_status(runtime, "a1", ContainerStatus.EXITED)
    assert (workdir / "stdout.log").read_text().strip() == f"/master/says|{workdir / 'code'}|{workdir / 'code'}"


@pytest.mark.parametrize(("with_code", "cwd"), [(True, "code"), (False, "")], ids=["code-dir", "attempt-dir"])
async def test_cwd(runtime: ProcessRuntime, tmp_path: Path, with_code: bool, cwd: str) -> None:
    workdir = tmp_path / "a1"
    if with_code:
        (workdir / "code").mkdir(parents=True)
    await runtime.start(start_task("a1", "pwd"), workdir)
    await wait_status(runtime, "a1", ContainerStatus.EXITED)
    assert (workdir / "stdout.log").read_text().strip() == str(workdir / cwd).rstrip("/")


async def test_stdout_and_stderr_go_to_files_kept_after_exit(runtime: ProcessRuntime, tmp_path: Path) -> None:
    workdir = tmp_path / "a1"
    await runtime.start(start_task("a1", "echo out; echo err >&2; exit 1"), workdir)
    await wait_status(runtime, "a1", ContainerStatus.EXITED)
    assert (workdir / "stdout.log").read_text() == "out\n"
    assert (workdir / "stderr.log").read_text() == "err\n"


async def test_a_second_start_of_the_same_attempt_is_ignored(runtime: ProcessRuntime, tmp_path: Path) -> None:
    workdir = tmp_path / "a1"
    await runtime.start(start_task("a1", "echo once"), workdir)
    await runtime.start(start_task("a1", "echo twice"), workdir)
    await wait_status(runtime, "a1", ContainerStatus.EXITED)
    assert (workdir / "stdout.log").read_text() == "once\n"
    assert len(runtime.reports()) == 1


async def test_start_failure_is_reported_not_raised(runtime: ProcessRuntime, tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    await runtime.start(start_task("a1", "true"), not_a_dir)
    report = await wait_status(runtime, "a1", ContainerStatus.EXITED)
    assert report.exit_code == PlatformExit.CONTAINER_START_FAILED
    assert report.reason is not None and "cannot start" in report.reason


async def test_leftover_children_die_with_the_leader(runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> None:
    await runtime.start(start_task("a1", "sleep 600 & exit 4"), tmp_path / "a1")
    pgid = groups.add(runtime.process_group("a1"))
    report = await wait_status(runtime, "a1", ContainerStatus.EXITED)
    assert report.exit_code == 4
    assert process_group.group_members(pgid) == []


async def test_stop_kills_the_whole_group_after_the_grace_period(
    runtime: ProcessRuntime, tmp_path: Path, groups: Groups
) -> None:
    # SIGTERM is ignored by the shell and, inherited, by both sleeps: only SIGKILL ends them.
    await runtime.start(start_task("a1", "trap '' TERM; sleep 600 & sleep 600"), tmp_path / "a1")
    pgid = groups.add(runtime.process_group("a1"))
    # the recording shell, the task's shell and two sleeps
    await eventually(lambda: len(process_group.group_members(pgid)) == 4, what="shells and two sleeps")
    began = time.monotonic()
    await runtime.stop("a1", 0.3, int(PlatformExit.PREEMPTED), "preempted by prod~big")
    assert time.monotonic() - began >= 0.3
    assert process_group.group_members(pgid) == []
    report = runtime.reports()[0]
    assert (report.status, report.exit_code, report.reason) == (
        ContainerStatus.EXITED,
        PlatformExit.PREEMPTED,
        "preempted by prod~big",
    )


async def test_stop_lets_a_task_finish_within_the_grace_period(runtime: ProcessRuntime, tmp_path: Path) -> None:
    workdir = tmp_path / "a1"
    script = "trap 'echo saved; exit 0' TERM; echo trapped >&2; while :; do sleep 0.05; done"
    await runtime.start(start_task("a1", script), workdir)
    # the process group exists before the shell has read its trap: wait until the task says it is armed
    stderr = workdir / "stderr.log"
    await eventually(lambda: stderr.exists() and stderr.read_text() == "trapped\n", what="trap armed")
    began = time.monotonic()
    await runtime.stop("a1", 30.0, int(PlatformExit.STOPPED), "stopped by the user")
    assert time.monotonic() - began < 10
    assert (workdir / "stdout.log").read_text() == "saved\n"
    assert runtime.reports()[0].exit_code == PlatformExit.STOPPED


async def test_stop_of_unknown_or_exited_attempt_does_nothing(runtime: ProcessRuntime, tmp_path: Path) -> None:
    await runtime.stop("nobody", 1.0)
    await runtime.start(start_task("a1", "exit 2"), tmp_path / "a1")
    await wait_status(runtime, "a1", ContainerStatus.EXITED)
    await runtime.stop("a1", 1.0, int(PlatformExit.STOPPED), "late")
    assert runtime.reports()[0].exit_code == 2


async def test_concurrent_stops_both_return_after_the_end(
    runtime: ProcessRuntime, tmp_path: Path, groups: Groups
) -> None:
    await runtime.start(start_task("a1", "sleep 600"), tmp_path / "a1")
    pgid = groups.add(runtime.process_group("a1"))
    await asyncio.gather(runtime.stop("a1", 1.0), runtime.stop("a1", 1.0))
    assert process_group.group_members(pgid) == []
    assert runtime.reports()[0].exit_code == 143  # no StopTask code given: the process's own


async def test_forget_drops_exited_attempts_only(runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> None:
    await runtime.start(start_task("done", "true"), tmp_path / "done")
    await runtime.start(start_task("live", "sleep 600"), tmp_path / "live")
    groups.add(runtime.process_group("live"))
    await wait_status(runtime, "done", ContainerStatus.EXITED)
    runtime.forget("done")
    runtime.forget("live")
    assert [r.attempt_id for r in runtime.reports()] == ["live"]
    assert (tmp_path / "done" / "stdout.log").exists()  # logs outlive the record


class TestReadoption:
    async def test_a_new_runtime_adopts_a_running_group_and_can_stop_it(self, tmp_path: Path, groups: Groups) -> None:
        first = await ProcessRuntime.open(tmp_path / "state")
        await first.start(start_task("a1", "sleep 600 & sleep 600"), tmp_path / "a1")
        pgid = groups.add(first.process_group("a1"))
        await eventually(lambda: len(process_group.group_members(pgid)) == 4, what="group up")
        before = first.reports()[0]
        await first.close()
        assert len(process_group.group_members(pgid)) == 4  # closing the runtime stops nothing

        second = await ProcessRuntime.open(tmp_path / "state")
        try:
            assert second.reports() == [before]
            await second.stop("a1", 5.0, int(PlatformExit.STOPPED), "stopped by the user")
            assert process_group.group_members(pgid) == []
            report = second.reports()[0]
            assert (report.status, report.exit_code) == (ContainerStatus.EXITED, PlatformExit.STOPPED)
        finally:
            await second.close()

    async def test_a_group_that_ended_while_no_runtime_watched_is_lost(self, tmp_path: Path, groups: Groups) -> None:
        first = await ProcessRuntime.open(tmp_path / "state")
        await first.start(start_task("a1", "sleep 600"), tmp_path / "a1")
        pgid = groups.add(first.process_group("a1"))
        await first.close()
        os.killpg(pgid, signal.SIGKILL)
        await eventually(lambda: not process_group.group_members(pgid), what="group killed")

        second = await ProcessRuntime.open(tmp_path / "state")
        try:
            report = await wait_status(second, "a1", ContainerStatus.EXITED)
            assert report.exit_code == PlatformExit.CONTAINER_LOST
            assert report.reason is not None and "exit code is unknown" in report.reason
        finally:
            await second.close()

    async def test_an_adopted_group_that_ends_by_itself_reports_its_recorded_exit(
        self, tmp_path: Path, groups: Groups
    ) -> None:
        first = await ProcessRuntime.open(tmp_path / "state")
        await first.start(start_task("a1", "sleep 0.3; exit 7"), tmp_path / "a1")
        groups.add(first.process_group("a1"))
        await first.close()
        exits: list[ContainerReport] = []
        second = await ProcessRuntime.open(tmp_path / "state", exits.append)
        try:
            assert second.reports()[0].status is ContainerStatus.RUNNING
            report = await wait_status(second, "a1", ContainerStatus.EXITED)
            assert report.exit_code == 7
            assert [r.attempt_id for r in exits] == ["a1"]
        finally:
            await second.close()

    async def test_exited_attempts_are_still_reported_until_forgotten(self, tmp_path: Path) -> None:
        first = await ProcessRuntime.open(tmp_path / "state")
        await first.start(start_task("a1", "exit 9"), tmp_path / "a1")
        exited = await wait_status(first, "a1", ContainerStatus.EXITED)
        await first.close()
        second = await ProcessRuntime.open(tmp_path / "state")
        assert second.reports() == [exited]
        second.forget("a1")
        await second.close()
        third = await ProcessRuntime.open(tmp_path / "state")
        assert third.reports() == []
        await third.close()
