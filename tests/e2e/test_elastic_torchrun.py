"""End to end (issue 31): a real ``torchrun`` (CPU, gloo) in an elastic job on three agents grows from 1 worker to 3
when capacity frees and shrinks back to 1 when another VC reclaims it, re-forming its group from the environment pai
injects alone; its training counter never goes back (it checkpoints to a shared directory and resumes)."""

from __future__ import annotations

import itertools
import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
import yaml

from pai.cli.submit import prepare_spec
from tests.e2e.harness import Cluster, cluster, wait_for

pytest.importorskip("torch", reason="the elastic e2e runs a real torchrun")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "elastic-torchrun.json"
CONFIG = {
    "virtualClusters": [{"name": "a", "guaranteed": {"cpu": 1, "memoryMB": 4096}},
                        {"name": "b", "guaranteed": {"cpu": 2, "memoryMB": 8192}}],
    "scheduler": {"elastic": {"resizeIntervalSeconds": 1}},
    "localPaths": [{"path": str(ROOT / "examples")}],
}
SLEEP = "trap 'exit 0' TERM; sleep 600 & wait"


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three agents of 1 CPU each; growth is tried every second (full passes, resize interval)."""
    tmp = tmp_path_factory.mktemp("elastic")
    config = tmp / "cluster.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # torchrun beside this python
    with mock.patch.dict(os.environ, {"PATH": path}), cluster(
            tmp, None, [("node-a", "127.0.0.2", 1), ("node-b", "127.0.0.3", 1), ("node-c", "127.0.0.4", 1)],
            grace_seconds=5, master_args=("--vc-config", str(config), "--full-pass-seconds", "1")) as c:
        yield c


def blocker(name: str, vc: str, n: int) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "virtualCluster": vc, "taskRoles": [
        {"name": "w", "taskNumber": n, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": SLEEP}]})


def progress(path: Path) -> list[tuple[int, int, int]]:
    """(step, world size, members in the file) per line rank 0 wrote."""
    if not path.exists():
        return []
    return [(int(a), int(b), int(c)) for a, b, c in (ln.split() for ln in path.read_text().splitlines() if ln)]


def current(c: Cluster, key: str) -> int:
    return int(c.job(key)["taskRoles"]["worker"]["elastic"]["current"])


def test_torchrun_follows_the_job_as_it_grows_and_shrinks_and_its_counter_never_goes_back(
        three: Cluster, tmp_path: Path) -> None:
    c = three
    others = c.submit(blocker(f"others-{uuid.uuid4().hex[:6]}", "b", 2))  # 2 of the 3 nodes taken
    c.wait_state(others, {"RUNNING"}, 30)
    shared = tmp_path / "shared"
    spec = json.loads(prepare_spec(EXAMPLE.read_text(), str(EXAMPLE)).body)
    spec.update(jobName=f"elastic-{uuid.uuid4().hex[:6]}", virtualCluster="a")
    spec["jobEnvs"].update(CHECKPOINT_DIR=str(shared), STEPS=0, GLOO_SOCKET_IFNAME="lo", STEP_SECONDS=0.1,
                           PET_RDZV_CONF="last_call_timeout=2")
    key = c.submit(json.dumps(spec))
    log = shared / "progress.log"

    def seen(world: int, after: int = 0) -> tuple[int, int, int] | None:
        return next((p for p in progress(log)[after:] if p[1] == world and p[2] == world), None)

    def why() -> str:
        tasks = c.job(key)["taskRoles"]["worker"]["taskStatuses"]
        logs = {t["taskIndex"]: c.log(key, "worker", t["taskIndex"], "stderr")[-2000:] for t in tasks
                if t.get("containerIp")}
        return json.dumps({"progress": progress(log)[-5:], "events": c.job(key)["events"], "stderr": logs})[-6000:]

    try:
        wait_for("training at 1 worker", lambda: seen(1), 90)
        assert current(c, key) == 1

        c.raw("PUT", f"/api/v2/jobs/{others}/executionType", b'{"value": "STOP"}', "application/json")
        mark = len(progress(log))
        grown = wait_for("training at 3 workers", lambda: seen(3, mark), 150)
        assert current(c, key) == 3

        mark = len(progress(log))
        reclaim = c.submit(blocker(f"reclaim-{uuid.uuid4().hex[:6]}", "b", 2))
        wait_for("training at 1 worker again", lambda: seen(1, mark), 150)
        c.wait_state(reclaim, {"RUNNING"}, 60)
        assert current(c, key) == 1
    except AssertionError as e:
        raise AssertionError(f"{e}\n{why()}") from e

    steps = [p[0] for p in progress(log)]
    assert all(b > a for a, b in itertools.pairwise(steps)), steps  # never back, never repeated
    assert grown[0] > 1
    kinds = [(e["kind"], e["details"].get("size")) for e in c.job(key)["events"] if e["kind"] == "resized"]
    assert kinds[-1] == ("resized", 1) and ("resized", 3) in kinds, kinds
    c.raw("PUT", f"/api/v2/jobs/{key}/executionType", b'{"value": "STOP"}', "application/json")
    c.wait_state(key, {"STOPPED"}, 30)
