"""PostgreSQL restarted under two masters and an agent (issue 27), on a server of the tests' own (tests/pgserver.py):
a fast restart, and a stop that outlasts the leader's step-down then a start. The masters live through it, a leader
is elected again, the job that was running finishes with its task started once, and a job submitted afterwards
runs. The lease is shortened (hidden options)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.ha import Ha, ha_cluster, sleeper, started_more_than_once, wait_ended
from tests.e2e.harness import wait_for
from tests.pgserver import PgServer, pg_server

LEASE_SECONDS = 4.0
LEASE = ("--lease-seconds", str(LEASE_SECONDS), "--lease-renew-seconds", "0.5", "--lease-step-down-seconds", "2.5",
         "--full-pass-seconds", "1")
MASTERS = ["master-a", "master-b"]


@pytest.fixture(scope="module")
def server() -> Iterator[PgServer]:
    with pg_server() as s:
        yield s


def submit(ha: Ha, master: str, name: str, starts: Path, seconds: float) -> str:
    return str(ha.apis[master].submit(sleeper(name, starts, seconds), "application/json")["jobName"])


def after_the_outage(ha: Ha, long: str, starts: Path) -> None:
    """Both masters alive, one leads, the job that ran through the outage and a fresh one succeed, each started once."""
    leader = ha.wait_leader(MASTERS, 6 * LEASE_SECONDS)
    assert ha.alive() == MASTERS, {m: ha.log(m)[-2000:] for m in MASTERS}
    fresh = submit(ha, leader, "fresh", starts, 0.5)
    states = wait_ended(ha.apis[leader], [long, fresh], 60)
    assert states == {long: "SUCCEEDED", fresh: "SUCCEEDED"}, states
    assert sorted(f.name for f in starts.iterdir()) == ["fresh", "long"]
    assert started_more_than_once(starts) == {}
    assert ha.apis[leader].job(long)["jobStatus"]["retries"] == 0


def test_a_fast_restart_of_postgresql_under_the_masters(server: PgServer, tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    starts.mkdir()
    db = server.create_database("fast_restart")
    with ha_cluster(tmp_path, db, 2, [("node-a", "127.0.0.2", 2)], master_args=LEASE, node_timeout=20) as ha:
        ha.wait_standby("master-b", 10)
        long = submit(ha, "master-a", "long", starts, 12)
        wait_for("the long task started", lambda: (starts / "long").exists(), 30)
        server.restart("fast")  # every connection of the masters is cut
        after_the_outage(ha, long, starts)


def test_postgresql_stopped_past_the_leaders_step_down_then_started(server: PgServer, tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    starts.mkdir()
    db = server.create_database("stop_start")
    with ha_cluster(tmp_path, db, 2, [("node-a", "127.0.0.2", 2)], master_args=LEASE, node_timeout=20) as ha:
        ha.wait_standby("master-b", 10)
        long = submit(ha, "master-a", "long", starts, 15)
        wait_for("the long task started", lambda: (starts / "long").exists(), 30)
        server.stop("fast")
        stopped = time.monotonic()
        # Down until the leader has given up (its renewals failed for the step-down time) and its lease has run out:
        # both masters ask for it once the server is back.
        wait_for("the leader to step down, its lease to run out",
                 lambda: "stepping down" in ha.log("master-a") and time.monotonic() - stopped > LEASE_SECONDS,
                 4 * LEASE_SECONDS)
        server.start()
        after_the_outage(ha, long, starts)
