"""pai masters."""

from __future__ import annotations

import json
import time

from .conftest import Run
from .fake_master import FakeMaster


def test_masters_table_marks_the_leader_and_the_master_that_answered(run: Run, logged_in: FakeMaster) -> None:
    now = time.time() * 1000
    logged_in.reply("GET", "/api/v2/masters", [
        {"url": "http://m1:9186", "role": "leader", "epoch": 7, "lastRenewal": now - 1000, "self": False},
        {"url": "http://m2:9186", "role": "standby", "epoch": 7, "lastRenewal": now - 65_000, "self": True},
    ])
    result = run("masters")
    assert result.exit_code == 0, result.output
    assert [line.rstrip() for line in result.stdout.splitlines()] == [
        "URL             ROLE     EPOCH  LAST RENEWAL  ANSWERED",
        "http://m1:9186  leader   7      1s ago        no",
        "http://m2:9186  standby  7      1m ago        yes",
    ]


def test_masters_json_is_the_raw_list(run: Run, logged_in: FakeMaster) -> None:
    raw = [{"url": "http://m1:9186", "role": "leader", "epoch": 1, "lastRenewal": 1, "self": True}]
    logged_in.reply("GET", "/api/v2/masters", raw)
    assert json.loads(run("masters", "-o", "json").stdout) == raw
