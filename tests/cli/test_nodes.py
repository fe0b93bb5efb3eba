"""pai nodes."""

from __future__ import annotations

import json
import time

from .builders import node
from .conftest import Run
from .fake_master import FakeMaster


def test_nodes_table_shows_usage_and_heartbeat_age(run: Run, logged_in: FakeMaster) -> None:
    now = time.time() * 1000
    lost = node("node2", address="127.0.0.3", state="LOST", lastHeartbeat=now - 2 * 3_600_000 - 1000,
                used={"gpu": 0, "cpu": 0, "memoryMB": 0}, total={"gpu": 0, "cpu": 4, "memoryMB": 512},
                problems=["work directory /w: 10 MB free, below 1024 MB"], failedGpus=[1])
    gpus = node(lastHeartbeat=now - 90_000, gpuType="NVIDIA H100 80GB HBM3", gpuMemoryMB=81559)
    logged_in.reply("GET", "/api/v2/nodes", [gpus, lost])
    result = run("nodes")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "NAME   ADDRESS    STATE  GPU  GPU MODEL                      CPU    MEM      LAST HEARTBEAT  HEALTH",
        "node1  127.0.0.2  READY  2/4  NVIDIA H100 80GB HBM3 (79.6G)  3.5/8  4G/16G   1m ago          ok",
        "node2  127.0.0.3  LOST   0/0  A100                           0/4    0M/512M  2h ago          "
        "work directory /w: 10 MB free, below 1024 MB; failed GPUs 1",
    ]


def test_nodes_json_is_the_raw_list(run: Run, logged_in: FakeMaster) -> None:
    raw = [node()]
    logged_in.reply("GET", "/api/v2/nodes", raw)
    assert json.loads(run("nodes", "-o", "json").stdout) == raw
