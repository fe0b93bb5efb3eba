"""A sick disk is the node's problem: a real agent (process runtime, its lease watchdog) on a small tmpfs that a task
fills, or on a work directory made read-only. The node is reported unhealthy at once, with figures (the periodic
health check is an hour away in these tests); the tasks outlive the lease's expiry; a task that fails because it
cannot write, and a start on the sick node, end -210 (NodeDiskFull); the agent's log has no traceback flood. The
same with the docker runtime. And a chatty task's logs stay within their share, so that the disk never fills."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families

from pai.nodeagent import logcap, process_group
from pai.nodeagent.fence import SLACK_SECONDS
from pai.nodeagent.paths import LogStream
from pai.protocol import ContainerReport, ContainerStatus, PlatformExit
from tests.diskkit import fill, read_only, require_mount, small_disk
from tests.dockerkit import containers_labelled
from tests.eventually import eventually
from tests.nodeagent.builders import start_task
from tests.nodeagent.conftest import Groups
from tests.nodeagent.fake_master import FakeMaster
from tests.nodeagent.test_agent import config, pgid_of, reported, running
from tests.nodeagent.test_docker_runtime import task

NODE_TIMEOUT = 1.0
# Appends a page every 50 ms, opening the file anew each time; ends 3 when one fails (as a task that cannot
# write would).
WRITER = 'while head -c 4096 /dev/zero >> "$PAI_WORK_DIR/out.bin"; do sleep 0.05; done; exit 3'


@pytest.fixture
async def master() -> AsyncIterator[FakeMaster]:
    m = FakeMaster(node_timeout_seconds=NODE_TIMEOUT, fence_grace_seconds=0.3)
    await m.start()
    yield m
    await m.close()


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path / "agent", 16) as path:
        yield path


def problems(master: FakeMaster) -> tuple[str, ...]:
    return master.requests[-1].problems if master.requests else ()


def exited(master: FakeMaster, attempt_id: str) -> ContainerReport | None:
    return reported(master, attempt_id, ContainerStatus.EXITED)


async def past_the_lease(since: float) -> None:
    """Wait until a lease last renewed at ``since`` would have run out and its watchdog acted (the one fixed
    wait here: what it checks is that nothing happens)."""
    deadline = since + NODE_TIMEOUT + SLACK_SECONDS + 1.5
    await eventually(lambda: time.monotonic() > deadline, timeout=NODE_TIMEOUT + SLACK_SECONDS + 5,
                     what="past the lease's expiry")


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info]


async def test_a_task_that_fills_the_disk_makes_the_node_sick_at_once_and_the_others_are_not_failed(
        work_dir: Path, master: FakeMaster, groups: Groups, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "pai")
    master.send(start_task("sleeper", "sleep 600"), start_task("writer", WRITER))
    cfg = config(work_dir.parent, master.url, work_dir=work_dir, watchdog=True, health_seconds=3600,
                 min_free_disk_mb=0)
    async with running(cfg) as agent:
        await eventually(lambda: reported(master, "writer", ContainerStatus.RUNNING), what="running")
        sleeper = pgid_of(agent, "sleeper", groups)
        assert problems(master) == ()
        master.send(start_task("filler", "head -c 100M /dev/zero > big; exec sleep 600"))
        await eventually(lambda: reported(master, "filler", ContainerStatus.RUNNING), what="the filler running")
        filler = pgid_of(agent, "filler", groups)

        sick = await eventually(lambda: [p for p in problems(master) if p.startswith("disk full: ")],
                                what="the node reported disk full")
        filled_at = time.monotonic()
        assert f"work directory {work_dir}: 0 MB free of 16 MB" in sick[0]

        writer = await eventually(lambda: exited(master, "writer"), what="the writer's exit")
        assert writer.exit_code == PlatformExit.NODE_DISK_FULL
        assert writer.reason is not None and "the task's own exit code was 3" in writer.reason

        master.send(start_task("late", "echo hello"))
        late = await eventually(lambda: exited(master, "late"), what="a start on the sick node")
        assert late.exit_code == PlatformExit.NODE_DISK_FULL and "not started: the node is sick" in str(late.reason)

        await past_the_lease(filled_at)  # the lease file cannot be written; its pipe keeps the watchdog at bay
        assert reported(master, "sleeper", ContainerStatus.RUNNING)
        assert process_group.group_members(sleeper) and process_group.group_members(filler)
        assert agent._watchdog is not None and agent._watchdog.poll() is None
        assert not agent.fenced
        async with ClientSession() as http, http.get(f"http://127.0.0.1:{agent.log_port}/metrics") as resp:
            metrics = await resp.text()
        failed = {(s.labels["what"], s.labels["errno"]): s.value for family in text_string_to_metric_families(metrics)
                  for s in family.samples if s.name == "pai_node_disk_write_failures_total"}
        assert failed.get(("the lease", "ENOSPC"), 0) >= 1

    warnings = [r for r in caplog.records if r.getMessage() == "cannot write to the work directory"]
    assert tracebacks(caplog) == [] and 1 <= len(warnings) <= 5, [r.getMessage() for r in caplog.records]


async def test_a_read_only_work_directory_makes_the_node_sick_at_once_and_the_tasks_stay(
        tmp_path: Path, master: FakeMaster, groups: Groups, caplog: pytest.LogCaptureFixture) -> None:
    require_mount()
    caplog.set_level(logging.INFO, "pai")
    master.send(start_task("sleeper", "sleep 600"), start_task("writer", WRITER))
    cfg = config(tmp_path, master.url, watchdog=True, health_seconds=3600, min_free_disk_mb=0)
    async with running(cfg) as agent:
        await eventually(lambda: reported(master, "writer", ContainerStatus.RUNNING), what="running")
        sleeper = pgid_of(agent, "sleeper", groups)
        with read_only(cfg.work_dir):
            sick = await eventually(lambda: [p for p in problems(master) if p.startswith("read-only: ")],
                                    what="the node reported read-only")
            since = time.monotonic()
            assert f"work directory {cfg.work_dir} is read-only" in sick[0] and "MB free of" in sick[0]
            writer = await eventually(lambda: exited(master, "writer"), what="the writer's exit")
            assert writer.exit_code == PlatformExit.NODE_DISK_FULL
            master.send(start_task("late", "echo hello"))
            late = await eventually(lambda: exited(master, "late"), what="a start on the sick node")
            assert late.exit_code == PlatformExit.NODE_DISK_FULL
            await past_the_lease(since)
            assert reported(master, "sleeper", ContainerStatus.RUNNING)
            assert process_group.group_members(sleeper)
            assert agent._watchdog is not None and agent._watchdog.poll() is None
    warnings = [r for r in caplog.records if r.getMessage() == "cannot write to the work directory"]
    assert tracebacks(caplog) == [] and 1 <= len(warnings) <= 5, [r.getMessage() for r in caplog.records]


async def test_a_chatty_task_keeps_within_its_share_and_the_disk_never_fills(
        work_dir: Path, master: FakeMaster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "pai")
    # 64 MB of stdout and 16 MB of stderr, at about 25 MB/s, on a 16 MB disk, against a 2 MB share per task.
    chatty = ("i=0; while [ $i -lt 128 ]; do head -c 524288 /dev/zero; i=$((i+1)); sleep 0.02; done; "
              "j=0; while [ $j -lt 32 ]; do head -c 524288 /dev/zero >&2; j=$((j+1)); sleep 0.02; done; echo done")
    quiet = "i=0; while [ $i -lt 60 ]; do echo line $i; i=$((i+1)); sleep 0.05; done"
    master.send(start_task("chatty", chatty), start_task("quiet", quiet))
    cfg = config(work_dir.parent, master.url, work_dir=work_dir, min_free_disk_mb=0, health_seconds=0.2,
                 max_task_log_bytes=2 << 20)
    async with running(cfg) as agent:
        done = await eventually(lambda: exited(master, "chatty"), timeout=60, what="the chatty task's end")
        quiet_done = await eventually(lambda: exited(master, "quiet"), timeout=30, what="the quiet task's end")
        kept = await eventually(lambda: sum(logcap.size(agent.paths.log_file("chatty", s)) for s in LogStream)
                                <= 2 << 20, what="the task's logs within its share after the last pass")
        dropped = sum(logcap.dropped(agent.paths.log_file("chatty", s)) for s in LogStream)
        quiet_log = agent.paths.log_file("quiet", LogStream.STDOUT).read_text()
    assert (done.exit_code, quiet_done.exit_code) == (0, 0)
    assert kept and dropped >= (80 << 20) - (2 << 20) - 2 * 524288
    assert quiet_log.splitlines() == [f"line {i}" for i in range(60)]
    assert all(r.problems == () for r in master.requests)  # never short of disk
    assert not [r for r in caplog.records if r.getMessage() == "cannot write to the work directory"]


async def test_the_docker_runtime_on_a_full_disk(work_dir: Path, master: FakeMaster, docker_host: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "pai")
    # busybox's head exits 0 when its writes fail; its dd does not
    in_container = "while dd if=/dev/zero bs=4096 count=1 2>/dev/null >> /pai/work/out.bin; do sleep 0.05; done; exit 3"
    master.send(task("sleeper", "sleep 600"), task("writer", in_container))
    cfg = config(work_dir.parent, master.url, work_dir=work_dir, watchdog=True, health_seconds=3600,
                 min_free_disk_mb=0, runtime="docker", docker_host=docker_host)
    async with running(cfg) as agent:
        await eventually(lambda: reported(master, "writer", ContainerStatus.RUNNING), timeout=30, what="running")
        await eventually(lambda: reported(master, "sleeper", ContainerStatus.RUNNING), timeout=30, what="running")
        fill(work_dir)  # the disk fills from outside any task
        await eventually(lambda: [p for p in problems(master) if p.startswith("disk full: ")],
                         what="the node reported disk full")
        filled_at = time.monotonic()
        writer = await eventually(lambda: exited(master, "writer"), what="the writer's exit")
        assert writer.exit_code == PlatformExit.NODE_DISK_FULL, writer
        master.send(task("late", "echo hello"))
        late = await eventually(lambda: exited(master, "late"), what="a start on the sick node")
        assert late.exit_code == PlatformExit.NODE_DISK_FULL
        await past_the_lease(filled_at)
        assert reported(master, "sleeper", ContainerStatus.RUNNING)
        assert containers_labelled(docker_host, "pai.attempt=sleeper")
        assert agent._watchdog is not None and agent._watchdog.poll() is None
    assert tracebacks(caplog) == []
