"""End to end: VC `b` reclaims its guarantee from VC `a`, which borrowed the whole cluster."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.harness import TERMINAL, Cluster, cluster, wait_for

VC_CONFIG = {
    "virtualClusters": [
        {"name": "a", "guaranteed": {"cpu": "50%", "memoryMB": "50%"}},
        {"name": "b", "guaranteed": {"cpu": "50%", "memoryMB": "50%"}},
    ],
}
# Exits 0 on SIGTERM after saying so: a graceful victim.
GRACEFUL = "trap 'echo got SIGTERM; exit 0' TERM; echo started; sleep {s} & wait; echo finished"


@pytest.fixture(scope="module")
def vcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("preempt")
    config = tmp / "vcs.yaml"
    config.write_text(yaml.safe_dump(VC_CONFIG))
    with cluster(tmp, None, [("node-a", "127.0.0.2", 2), ("node-b", "127.0.0.3", 2)], grace_seconds=5,
                 master_args=("--vc-config", str(config))) as c:
        yield c


def job(name: str, vc: str, seconds: int, cpus: int = 1) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "virtualCluster": vc, "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": cpus, "memoryMB": 256, "gpuNumber": 0,
         "command": GRACEFUL.format(s=seconds)}]})


def state(c: Cluster, key: str) -> str:
    return str(c.job(key)["jobStatus"]["state"])


def test_reclaim_preempts_borrowed_jobs_gracefully_and_requeues_them(vcs: Cluster) -> None:
    c = vcs
    a_jobs = [c.submit(job(f"a{i}", "a", 12)) for i in range(4)]
    wait_for("a's four jobs running", lambda: all(state(c, k) == "RUNNING" for k in a_jobs), 30)
    wait_for("a's tasks started", lambda: all("started" in c.log(k, "w", 0) for k in a_jobs), 30)
    _, vc_a = c.raw("GET", "/api/v2/virtual-clusters/a")
    assert vc_a["resourcesUsed"]["cpu"] == 4 and vc_a["resourcesBorrowed"]["cpu"] == 2

    b = c.submit(job("b0", "b", 1, cpus=2))
    preempted_at = time.monotonic()
    detail_b = c.wait_state(b, TERMINAL, timeout=60)
    assert detail_b["jobStatus"]["state"] == "SUCCEEDED"
    assert time.monotonic() - preempted_at < 12, "b waited for a's jobs to end instead of reclaiming"

    victims = [k for k in a_jobs if any(e["kind"] == "preempted" for e in c.job(k)["events"])]
    assert len(victims) == 2, [c.job(k)["events"] for k in a_jobs]
    for k in victims:
        events = c.job(k)["events"]
        preempted = next(e for e in events if e["kind"] == "preempted")
        assert "admin~b0" in preempted["message"] and preempted["details"]["preemptor"] == "admin~b0"
        assert preempted["details"]["rule"]
        assert any(e["kind"] == "requeued" for e in events)
        attempts = c.api.http.json("GET", f"/api/v2/jobs/{k}/attempts")
        assert attempts[0]["exitCode"] == -300  # the preempted attempt
        # graceful: the task got SIGTERM and ran its handler (the grace period is 5 s; it exits at once)
        (stdout,) = Path(c.tmp).glob(f"node-*/attempts/{attempts[0]['attemptId']}/stdout.log")
        assert "got SIGTERM" in stdout.read_text()
    # every job of `a` ends well: the victims ran again once capacity came back
    for k in a_jobs:
        detail = c.wait_state(k, TERMINAL, timeout=90)
        assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    for k in victims:
        attempts = c.api.http.json("GET", f"/api/v2/jobs/{k}/attempts")
        assert [a["state"] for a in attempts] == ["STOPPED", "SUCCEEDED"]
        status = c.job(k)["jobStatus"]  # preemption is not counted against retryCount: a platform retry
        assert status["retryDetails"] == {"user": 0, "platform": 1, "resource": 0} and status["attemptId"] == 1
