"""A write made through the standby master wakes the leader at once (issue 27: ``pai.store.wakeups``, LISTEN/NOTIFY
on PostgreSQL): two ``pai master`` processes on one PostgreSQL database with the full pass at 60 s, so that only the
notification can explain a job submitted to the standby running, or stopped through it, within a few seconds."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.dbkit import database_url
from tests.e2e.harness import cluster, wait_for
from tests.e2e.test_failover import start_standby

FULL_PASS_SECONDS = 60.0
MASTER = ("--lease-seconds", "4", "--lease-renew-seconds", "0.5", "--lease-step-down-seconds", "2.5",
          "--full-pass-seconds", str(FULL_PASS_SECONDS))
BOUND_SECONDS = 5.0  # well under the full pass


def job(name: str, command: str) -> bytes:
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": command}]}).encode()


def test_a_job_submitted_to_the_standby_runs_and_one_stopped_through_it_stops_within_seconds(tmp_path: Path) -> None:
    with database_url("postgresql", tmp_path) as db, \
            cluster(tmp_path, db, [("node-a", "127.0.0.2", 2)], master_args=MASTER) as c:
        _, standby = start_standby(c, db, MASTER)
        wait_for("both masters listed", lambda: len(standby.masters()) == 2, 10)
        assert "listening channel=pai_launcher" in c.master_log()

        submitted = time.monotonic()
        key = str(standby.submit(job("via-standby", "sleep 60"), "application/json")["jobName"])

        def task_running() -> bool:
            detail = c.job(key)
            return detail["jobStatus"]["state"] == "RUNNING" and \
                [t["taskState"] for _, t in c.tasks(detail)] == ["RUNNING"]

        wait_for("the job submitted to the standby runs", task_running, 30)
        took = time.monotonic() - submitted
        assert took <= BOUND_SECONDS, took

        stopped = time.monotonic()
        standby.stop_job(key)
        wait_for("the job stopped through the standby ends", lambda: c.job(key)["jobStatus"]["state"] == "STOPPED", 30)
        took = time.monotonic() - stopped
        assert took <= BOUND_SECONDS + 3.0, took  # (the task is given --grace-seconds 3 to end)
