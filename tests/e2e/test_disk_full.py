"""A full disk on a node is the platform's fault, end to end: a master and real agents, one of them with its work
directory on a small tmpfs that a task fills. The master shows the node unhealthy (``GET /api/v2/nodes``, ``pai
nodes``, ``/metrics``) and places nothing new there; a task that fails because it cannot write ends -210 and its
job is requeued elsewhere without using a retry; a task that does not write runs on past the node timeout (its
agent's lease is not written, and its watchdog leaves it alone); once the disk has room again the node is healthy.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pai.cli.nodes import render_nodes
from tests.diskkit import small_disk
from tests.e2e.harness import Cluster, cluster, wait_for

FAST_FENCING = ("--node-timeout", "3", "--fence-grace", "1")
WRITER = 'while head -c 4096 /dev/zero >> "$PAI_WORK_DIR/out.bin"; do sleep 0.1; done; exit 3'


def _job(name: str, command: str) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "retryCount": 0, "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": command}]})


def _node(c: Cluster, name: str) -> dict[str, Any]:
    return next(n for n in c.api.nodes() if n["name"] == name)


def _task(c: Cluster, key: str) -> dict[str, Any]:
    return dict(c.tasks(c.job(key))[0][1])


def test_a_full_disk_fails_no_job_as_the_users_and_takes_nothing_new(tmp_path: Path) -> None:
    with small_disk(tmp_path / "w1", 24), cluster(
            tmp_path, None, [("w1", "127.0.0.2", 4)], master_args=FAST_FENCING,
            agent_args=("--runtime", "process", "--min-free-disk-mb", "0")) as c:
        sleeper, writer = c.submit(_job("sleeper", "sleep 600")), c.submit(_job("writer", WRITER))
        for key in (sleeper, writer):
            c.wait_state(key, {"RUNNING"})
        wait_for("both tasks running", lambda: all(_task(c, k)["taskState"] == "RUNNING" for k in (sleeper, writer)))
        filler = c.submit(_job("filler", "head -c 100M /dev/zero > big; exec sleep 600"))

        sick = wait_for("w1 unhealthy", lambda: [p for p in _node(c, "w1")["problems"] if p.startswith("disk full:")])
        filled_at = time.monotonic()
        assert f"work directory {tmp_path / 'w1'}: 0 MB free of 24 MB" in sick[0] and not _node(c, "w1")["healthy"]
        assert "disk full: work directory" in render_nodes(c.api.nodes(), time.time() * 1000)
        _, metrics = c.raw("GET", "/metrics")
        assert 'pai_node_problems{node="w1",reason="disk_full"} 1.0' in metrics

        # The writer failed because it could not write: the node's fault, requeued, no retry used; it waits, since
        # the only node is sick, and runs once another node joins.
        requeued = c.wait_state(writer, {"WAITING"})
        assert requeued["jobStatus"]["retryDetails"] == {"user": 0, "platform": 1, "resource": 0}
        _, attempts = c.raw("GET", f"/api/v2/jobs/{writer}/attempts")
        first = next(a for a in attempts if a["jobAttempt"] == 0)
        assert (first["exitCode"], first["node"]) == (-210, "w1")
        assert "the task's own exit code was 3" in first["exitReason"]
        c.spawn_agent("w2", "127.0.0.3", 2)
        c.wait_state(writer, {"RUNNING"})
        assert _task(c, writer)["containerNodeName"] == "w2"

        # The sleeper writes nothing: it runs on, past the node timeout and the lease's expiry.
        wait_for("past the node timeout", lambda: time.monotonic() > filled_at + 3 + 1 + 2, timeout=15)
        assert c.job(sleeper)["jobStatus"]["state"] == "RUNNING"
        assert _task(c, sleeper)["taskState"] == "RUNNING" and c.job(sleeper)["jobStatus"]["attemptId"] == 0
        assert c.job(filler)["jobStatus"]["state"] == "RUNNING"

        # Room again: the node is healthy at its next check and takes work again.
        for big in (tmp_path / "w1" / "attempts").glob("*/big"):
            big.unlink()
        wait_for("w1 healthy again", lambda: _node(c, "w1")["healthy"], timeout=20)
        for key in (sleeper, writer, filler):
            c.api.stop_job(key)
        agent_log = c.logs["w1"].read_text()
    assert "Traceback" not in agent_log
    assert 1 <= agent_log.count("cannot write to the work directory") <= 5
