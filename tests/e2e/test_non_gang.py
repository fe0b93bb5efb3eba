"""End to end: a job with ``gangAllocation: false`` on a master and an agent (process runtime) that holds 2 of its 3
tasks: two run and the job RUNS while the third waits; when one ends, the third runs; the job succeeds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import TERMINAL, Cluster, cluster, wait_for


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("nongang")
    with cluster(tmp, None, [("node-a", "127.0.0.2", 2)]) as c:
        yield c


def job(name: str, release: Path) -> str:
    # each task says which peers it sees, then runs until the test releases it
    command = (f"echo hosts=$PAI_TASK_ROLE_w_HOST_LIST ip2=${{PAI_HOST_IP_w_2:-none}}; "
               f"while [ ! -e {release}/$PAI_TASK_INDEX ]; do sleep 0.05; done")
    return json.dumps({"jobName": name, "image": "busybox", "extras": {"gangAllocation": False}, "taskRoles": [
        {"name": "w", "taskNumber": 3, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": command}]})


def task_states(c: Cluster, key: str) -> list[str]:
    return [t["taskState"] for t in c.job(key)["taskRoles"]["w"]["taskStatuses"]]


def test_tasks_start_as_capacity_allows_and_the_job_succeeds(small: Cluster, tmp_path: Path) -> None:
    c = small
    key = c.submit(job("loose", tmp_path))
    wait_for("two tasks running, the third waiting",
             lambda: task_states(c, key) == ["RUNNING", "RUNNING", "WAITING"], 30)
    detail = c.job(key)
    assert detail["jobStatus"]["state"] == "RUNNING"
    wait_for("task 0 said which peers it sees", lambda: "hosts=" in c.log(key, "w", 0), 30)
    first = c.log(key, "w", 0)
    assert first.count("127.0.0.2:") == 2 and "ip2=none" in first  # its unplaced peer is not announced
    assert task_states(c, key)[2] == "WAITING"  # still: no capacity was freed
    (tmp_path / "0").touch()
    wait_for("the third task running once the first ended",
             lambda: task_states(c, key) == ["SUCCEEDED", "RUNNING", "RUNNING"], 30)
    wait_for("task 2 said which peers it sees", lambda: "hosts=" in c.log(key, "w", 2), 30)
    assert "ip2=127.0.0.2" in c.log(key, "w", 2)
    (tmp_path / "1").touch()
    (tmp_path / "2").touch()
    assert c.wait_state(key, TERMINAL, timeout=60)["jobStatus"]["state"] == "SUCCEEDED"
