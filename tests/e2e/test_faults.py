"""Fault injection, seeded and bounded in time: SIGKILL of the master at random points of jobs' lives, SIGKILL
of an agent (restarted and not), an agent cut off from the master while alive. Nothing is lost, nothing runs
twice at once, every job ends right. ``PAI_FAULT_SEED`` replays a run."""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pai.nodeagent import process_group
from tests.e2e.harness import TERMINAL, Cluster, cluster, processes_with, wait_for
from tests.partition import Partition

SEED = int(os.environ.get("PAI_FAULT_SEED", "8"))
FAST_FENCING = ("--node-timeout", "3", "--fence-grace", "1")  # LOST after 3 s, requeued after 3 + 3.6 s


def _task_command(ledger: Path, marker: str, seconds: float) -> str:
    """Appends start/end lines (node address, pid) to the ledger; ``marker`` finds its processes."""
    ticks = max(1, int(seconds / 0.25))
    return (f'echo "start $PAI_JOB_NAME $PAI_CURRENT_TASK_ROLE_NAME $PAI_TASK_INDEX $PAI_CONTAINER_HOST_IP $$" '
            f'>> {ledger}; i=0; while [ $i -lt {ticks} ]; do sleep 0.25; i=$((i+1)); done; '
            f'echo "end $PAI_JOB_NAME $PAI_CURRENT_TASK_ROLE_NAME $PAI_TASK_INDEX $PAI_CONTAINER_HOST_IP $$" '
            f'>> {ledger} # {marker}')


def _job(name: str, ledger: Path, marker: str, seconds: float, instances: int = 1) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": instances, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
         "command": _task_command(ledger, marker, seconds)}]})


def _ledger(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def _copies(marker: str) -> int:
    """How many attempts whose command holds ``marker`` run now (each attempt is a process group)."""
    stats = (process_group.read_stat(pid) for pid in processes_with(marker))
    return len({st.pgid for st in stats if st is not None and st.alive})


@dataclass
class Sampler:
    """Counts, every 50 ms in a thread, the live copies of a task; ``most`` is the largest count seen."""

    marker: str
    most: int = 0
    samples: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, _copies(self.marker))
            self.samples += 1
            time.sleep(0.05)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most


def _task(c: Cluster, key: str) -> dict[str, object]:
    (_, task), = c.tasks(c.job(key))
    return task


def _running_on(c: Cluster, key: str, address: str) -> bool:
    task = _task(c, key)
    return task["taskState"] == "RUNNING" and task["containerIp"] == address


# ---- an agent dies, or is cut off ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Partition]]:
    """node-b talks to the master directly, node-a through a proxy the tests can cut."""
    tmp = tmp_path_factory.mktemp("faults")
    with cluster(tmp, None, [("node-b", "127.0.0.3", 2)], master_args=FAST_FENCING) as c:
        partition = Partition(int(c.url.rsplit(":", 1)[1]))
        partition.heal()
        c.spawn_agent("node-a", "127.0.0.2", 2, master_url=partition.url)
        yield c, partition
        partition.cut()


@pytest.fixture
def cluster_a_first(faulty: tuple[Cluster, Partition]) -> Iterator[tuple[Cluster, Partition]]:
    """Both agents up and reachable; node-b cordoned until a test's task runs on node-a."""
    c, partition = faulty
    if partition._listener is None:
        partition.heal()
    if c.procs["node-a"].poll() is not None:
        c.restart("node-a")
    wait_for("both agents READY", lambda: {"node-a", "node-b"} <= c.ready_nodes(), 30)
    c.api.set_node_state("node-b", "CORDONED")
    yield c, partition
    c.api.set_node_state("node-b", "READY")


def _start_on_a(c: Cluster, tmp: Path, seconds: float) -> tuple[str, Path, str]:
    marker = f"pai-fault-{uuid.uuid4().hex}"
    ledger = tmp / f"{marker}.ledger"
    key = c.submit(_job(f"f-{marker[-8:]}", ledger, marker, seconds))
    wait_for("the task running on node-a", lambda: _running_on(c, key, "127.0.0.2"), 30)
    return key, ledger, marker


def test_a_killed_agent_restarted_at_once_keeps_its_task(cluster_a_first: tuple[Cluster, Partition],
                                                         tmp_path: Path) -> None:
    c, _ = cluster_a_first
    key, ledger, marker = _start_on_a(c, tmp_path, 6)
    sampler = Sampler(marker)
    c.kill("node-a")
    c.restart("node-a")
    detail = c.wait_state(key, TERMINAL, 40)
    assert sampler.stop() == 1
    assert detail["jobStatus"]["state"] == "SUCCEEDED"
    lines = _ledger(ledger)
    assert [line[0] for line in lines] == ["start", "end"]  # one run, never restarted
    assert lines[0][-1] == lines[1][-1]  # the same process went on under the new agent


def test_a_killed_agent_not_restarted_is_fenced_before_its_task_runs_elsewhere(
        cluster_a_first: tuple[Cluster, Partition], tmp_path: Path) -> None:
    c, _ = cluster_a_first
    key, ledger, marker = _start_on_a(c, tmp_path, 14)
    c.api.set_node_state("node-b", "READY")
    sampler = Sampler(marker)
    killed = time.monotonic()
    c.kill("node-a")
    wait_for("the task running on node-b", lambda: _running_on(c, key, "127.0.0.3"), 30)
    requeued_after = time.monotonic() - killed
    detail = c.wait_state(key, TERMINAL, 40)
    assert sampler.stop() == 1, "two copies of the task ran at once"
    assert detail["jobStatus"]["state"] == "SUCCEEDED"
    assert [(line[0], line[4]) for line in _ledger(ledger)] == [
        ("start", "127.0.0.2"), ("start", "127.0.0.3"), ("end", "127.0.0.3")]
    assert requeued_after > 3 + 3.6 - 1  # the node timeout and the fencing window, give or take a heartbeat
    assert "lease expired: fencing" in (c.tmp / "node-a" / "fence.log").read_text()
    status, attempts = c.raw("GET", f"/api/v2/jobs/{key}/attempts")
    assert status == 200 and "fencing window" in json.dumps(attempts)


def test_an_agent_cut_off_from_the_master_fences_itself(cluster_a_first: tuple[Cluster, Partition],
                                                        tmp_path: Path) -> None:
    c, partition = cluster_a_first
    key, ledger, marker = _start_on_a(c, tmp_path, 14)
    c.api.set_node_state("node-b", "READY")
    sampler = Sampler(marker)
    partition.cut()  # node-a's agent keeps running, but no request reaches the master
    wait_for("the task running on node-b", lambda: _running_on(c, key, "127.0.0.3"), 30)
    assert c.procs["node-a"].poll() is None
    detail = c.wait_state(key, TERMINAL, 40)
    assert sampler.stop() == 1, "two copies of the task ran at once"
    assert detail["jobStatus"]["state"] == "SUCCEEDED"
    assert [(line[0], line[4]) for line in _ledger(ledger)] == [
        ("start", "127.0.0.2"), ("start", "127.0.0.3"), ("end", "127.0.0.3")]
    assert "fencing: no answer from the master" in c.logs["node-a"].read_text()
    partition.heal()
    wait_for("node-a back", lambda: "node-a" in c.ready_nodes(), 30)


# ---- the master dies at random points --------------------------------------------------------------------


def test_sigkill_of_the_master_at_random_points_loses_nothing_and_runs_nothing_twice(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    ledger = tmp_path / "ledger"
    marker = f"pai-master-kill-{uuid.uuid4().hex}"
    kills, keys, tasks = 0, [], 0
    with cluster(tmp_path, None, [("node-a", "127.0.0.2", 3), ("node-b", "127.0.0.3", 3)]) as c:
        for i in range(12):
            instances = rng.randint(1, 2)
            keys.append(c.submit(_job(f"mk-{i}", ledger, f"{marker}-{i}", rng.uniform(0.3, 2.5), instances)))
            tasks += instances
            time.sleep(rng.uniform(0.0, 1.5))  # a random point: waiting, starting, running or ending
            c.kill("master")
            kills += 1
            c.restart("master")
            c.wait_master()
        finals = {key: c.wait_state(key, TERMINAL, 60)["jobStatus"]["state"] for key in keys}
    runs: dict[tuple[str, str], list[str]] = {}
    for event, job, _role, index, *_ in _ledger(ledger):
        runs.setdefault((job, index), []).append(event)
    duplicates = sum(1 for events in runs.values() if events.count("start") > 1)
    print(f"\nfault injection (seed {SEED}): master kills={kills} jobs={len(keys)} tasks={tasks} "
          f"ran={len(runs)} not-succeeded={sum(s != 'SUCCEEDED' for s in finals.values())} duplicates={duplicates}")
    assert set(finals.values()) == {"SUCCEEDED"}, (SEED, finals)
    assert len(runs) == tasks, (SEED, runs)  # no task lost
    assert duplicates == 0, (SEED, runs)
    assert all(events == ["start", "end"] for events in runs.values()), (SEED, runs)
