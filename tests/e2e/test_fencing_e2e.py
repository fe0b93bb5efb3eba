"""A leader frozen past its lease (issue 27): SIGSTOP the leading master's whole process group, the standby takes the
lease at the next epoch and runs what is submitted meanwhile; SIGCONT the old leader: it steps down without acting
again (no task started twice, no job's state going back, the new leader keeps its epoch), and its log says how it
found out: a write fenced off, or the step-down before it wrote. The lease is shortened (hidden options)."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

from pai.cli.api import MasterApi
from pai.cli.errors import CliError
from tests.dbkit import database_url
from tests.e2e.ha import ORDER, ha_cluster, metric, sleeper, started_more_than_once, task_state, wait_ended
from tests.e2e.harness import wait_for
from tests.e2e.pglocks import freeze_inside_a_fenced_write, freeze_outside_transactions

LEASE_SECONDS = 4.0
LEASE = ("--lease-seconds", str(LEASE_SECONDS), "--lease-renew-seconds", "0.5", "--lease-step-down-seconds", "2.5",
         "--full-pass-seconds", "1")
# The agents wait for a frozen master's answer as long as a request may take (10 s) before they turn to the
# standby: the node timeout must outlast that, or the agents fence their tasks meanwhile.
NODE_TIMEOUT = 20.0
LAUNCHER_ACTS = r"pai\.launcher (job state|job admitted|job preempted|node lost)"  # the log lines of a leader's acts


@contextmanager
def state_watch(api: MasterApi, keys: list[str]) -> Iterator[dict[str, list[tuple[str, str, int]]]]:
    """Every (job state, task state, retries) each job of ``keys`` (appended to meanwhile) went through, as read
    every 0.1 s from ``api``, consecutive repeats left out."""
    seen: dict[str, list[tuple[str, str, int]]] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for key in list(keys):
                try:
                    detail = api.job(key)
                except CliError:  # the master is busy or away for a moment: the next round reads it
                    continue
                now = (str(detail["jobStatus"]["state"]), task_state(detail), int(detail["jobStatus"]["retries"]))
                if seen.setdefault(key, [])[-1:] != [now]:
                    seen[key].append(now)
            stop.wait(0.1)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()


def backwards(seen: dict[str, list[tuple[str, str, int]]]) -> dict[str, list[tuple[str, str, int]]]:
    """The jobs whose state went back (RUNNING to WAITING, ended to anything) or that were retried."""
    return {key: states for key, states in seen.items()
            if any(ORDER[b[0]] < ORDER[a[0]] for a, b in pairwise(states))
            or any(retries for _, _, retries in states)}


def test_a_leader_frozen_past_its_lease_steps_down_once_thawed_and_acts_no_more(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    starts.mkdir()
    agents = [("node-a", "127.0.0.2", 2), ("node-b", "127.0.0.3", 2)]
    with database_url("postgresql", tmp_path) as db, \
            ha_cluster(tmp_path, db, 2, agents, master_args=LEASE, node_timeout=NODE_TIMEOUT) as ha:
        a, b = "master-a", "master-b"
        ha.wait_standby(b, 10)
        epoch = metric(ha.launcher_url(a), "pai_master_epoch")
        keys: list[str] = []

        def submit(master: str, name: str, seconds: float) -> str:
            keys.append(str(ha.apis[master].submit(sleeper(name, starts, seconds), "application/json")["jobName"]))
            return keys[-1]

        with state_watch(ha.apis[b], keys) as seen:
            long = submit(a, "long", 25)  # runs across the freeze and the thaw
            short = submit(a, "short", 6)  # running at the freeze, ended by the thaw
            wait_for("both started", lambda: (starts / "long").exists() and (starts / "short").exists(), 30)

            # Between its transactions: one frozen inside holds its locks, and the standby waits for them (below).
            freeze_outside_transactions(ha, a, db)
            frozen = time.monotonic()
            assert ha.wait_leader([b], 3 * LEASE_SECONDS) == b
            assert time.monotonic() - frozen >= LEASE_SECONDS - 1.0  # not before the frozen leader's lease ran out
            assert metric(ha.launcher_url(b), "pai_master_epoch") == epoch + 1
            during = [submit(b, f"during-{i}", 1) for i in range(2)]
            assert set(wait_ended(ha.apis[b], [short, *during], 40).values()) == {"SUCCEEDED"}
            assert ha.c.procs[a].poll() is None  # still frozen, not dead
            waiting = submit(b, "at-the-thaw", 1)  # being admitted while the old leader wakes up

            ha.signal(a, signal.SIGCONT)
            wait_for("the old leader a standby", lambda: metric(ha.launcher_url(a), "pai_master_leader") == 0.0, 10)
            assert ha.masters(a)[0] == (ha.url(b), "leader", False)
            after = submit(a, "after-the-thaw", 1)  # stored by the old leader, now a standby; run by the leader
            states = wait_ended(ha.apis[b], [long, waiting, after], 60)
            assert set(states.values()) == {"SUCCEEDED"}, states

            # the lease never went back
            assert ha.leading(b) and metric(ha.launcher_url(b), "pai_master_epoch") == epoch + 1
            assert started_more_than_once(starts) == {}
            assert sorted(f.name for f in starts.iterdir()) == sorted(
                ["long", "short", "during-0", "during-1", "at-the-thaw", "after-the-thaw"])
            assert backwards(seen) == {}, seen
            # How the old leader found out, first: a write of it fenced off, or its Elector's step-down before it wrote
            # (the renewal it asked at the thaw answered with the new holder, or too long without a renewal).
            log = ha.log(a).splitlines()
            down = next(i for i, line in enumerate(log) if "stepping down" in line)
            assert re.search(rf"a write was fenced off|reason=no renewal for|holds the lease at epoch {epoch + 1:.0f}$",
                             log[down]), log[down]
            acted = [line for line in log[down:] if re.search(LAUNCHER_ACTS, line)]
            assert acted == []  # from its step-down on, the old leader started, ended or requeued nothing


def test_a_leader_frozen_inside_a_fenced_write_does_not_keep_the_standby_from_taking_over(tmp_path: Path) -> None:
    """A leader stopped (SIGSTOP, a VM paused, a host cut off) in the middle of one of its fenced writes: its
    session stays idle in the transaction, holding the lease row. The standby must still lead once the lease has run
    out."""
    agents = [("node-a", "127.0.0.2", 1)]
    with database_url("postgresql", tmp_path) as db, \
            ha_cluster(tmp_path, db, 2, agents, master_args=LEASE, node_timeout=NODE_TIMEOUT) as ha:
        ha.wait_standby("master-b", 10)
        freeze_inside_a_fenced_write(ha, "master-a", db)
        assert ha.wait_leader(["master-b"], 3 * LEASE_SECONDS) == "master-b"
