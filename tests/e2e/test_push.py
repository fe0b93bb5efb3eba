"""Commands reach agents at once: a master whose agents heartbeat only every 2 s still starts a task in
milliseconds (the agent channel pokes the agent; the agent reports the start at once)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import TERMINAL, Cluster, cluster


@pytest.fixture(scope="module")
def slow_heartbeats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp: Path = tmp_path_factory.mktemp("push")
    with cluster(tmp, None, [("node-a", "127.0.0.2", 2)], master_args=("--heartbeat", "2")) as c:
        yield c


def short_job(name: str, seconds: float) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
         "command": f"sleep {seconds}"}]})


def states_seen(c: Cluster, key: str) -> list[str]:
    """The task's states as polled every 10 ms until the job ends."""
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        detail = c.job(key)
        tasks = c.tasks(detail)
        state = tasks[0][1]["taskState"] if tasks else "WAITING"
        if not seen or seen[-1] != state:
            seen.append(state)
        if detail["jobStatus"]["state"] in TERMINAL:
            break
        time.sleep(0.01)
    return seen


def test_a_task_of_a_third_of_a_second_shows_running_before_it_succeeds_every_time(slow_heartbeats: Cluster) -> None:
    # With starts delivered by heartbeat replies (every 2 s here) such a task went WAITING -> SUCCEEDED.
    for run in range(5):
        key = slow_heartbeats.submit(short_job(f"short-{run}-{uuid.uuid4().hex[:6]}", 0.3))
        seen = states_seen(slow_heartbeats, key)
        assert seen[-1] == "SUCCEEDED" and "RUNNING" in seen, (run, seen)

