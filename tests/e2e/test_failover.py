"""The launcher's election (issue 27): two ``pai master`` processes on one PostgreSQL database, exactly one leads;
the standby sends the agents to the leader and serves users; SIGKILL the leader and the standby leads within the
lease. On SQLite a second master is refused at start. The lease is shortened (hidden options) to keep this quick."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.dbkit import database_url
from tests.e2e.harness import ADMIN_PASSWORD, AGENT_TOKEN, Cluster, cluster, free_port, wait_for

LEASE_SECONDS, RENEW_SECONDS = 4.0, 0.5
LEASE = ("--lease-seconds", str(LEASE_SECONDS), "--lease-renew-seconds", str(RENEW_SECONDS),
         "--lease-step-down-seconds", "2.5", "--full-pass-seconds", "1")


def job(name: str) -> str:
    return json.dumps({"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "echo ran"}]})


def agent_post(url: str, path: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url + path, data=b"{}", method="POST", headers={
        "Authorization": f"Bearer {AGENT_TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get_status(url: str, path: str, token: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))


def start_standby(c: Cluster, db: str, args: tuple[str, ...] = LEASE) -> tuple[str, MasterApi]:
    """A second master on the same database (its own ports and data directory, the first's secret key), started with
    ``args``."""
    port, launcher = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    data = c.tmp / "master-b"
    data.mkdir(mode=0o700)
    (data / "secret-key").write_bytes((c.tmp / "master" / "secret-key").read_bytes())
    (data / "secret-key").chmod(0o600)
    c.spawn("master-b", ["master", "--port", str(port), "--data-dir", str(data), "--database-url", db,
                         "--advertise-url", url, "--launcher-port", str(launcher), "--workers", "2", *args])
    api = MasterApi(HttpClient(url, timeout=10))

    def up() -> Any:
        if c.procs["master-b"].poll() is not None:
            raise AssertionError(c.logs["master-b"].read_text()[-3000:])
        return api.http.json("GET", "/healthz")

    wait_for("the second master", up, 30)
    api.http.token = api.login("admin", ADMIN_PASSWORD)["token"]
    return url, api


def launcher_of(api: MasterApi, url: str) -> str:
    return str(next(m["launcherUrl"] for m in api.masters() if m["url"] == url))


def roles(api: MasterApi) -> list[tuple[str, str, bool]]:
    return [(m["url"], m["role"], m["self"]) for m in api.masters()]


def test_two_masters_on_postgresql_one_leads_the_standby_serves_and_takes_over_when_the_leader_dies(
        tmp_path: Path) -> None:
    with database_url("postgresql", tmp_path) as db, \
            cluster(tmp_path, db, [("node-a", "127.0.0.2", 2)], master_args=LEASE) as c:
        b_url, b = start_standby(c, db)
        wait_for("both masters listed", lambda: len(b.masters()) == 2, 10)
        assert roles(b) == [(c.url, "leader", False), (b_url, "standby", True)]
        assert roles(c.api) == [(c.url, "leader", True), (b_url, "standby", False)]
        b_launcher = launcher_of(b, b_url)
        assert [m["launcherUrl"] for m in b.masters()] == [c.launcher_url, b_launcher]
        assert (metric(c.launcher_url, "pai_master_leader"), metric(b_launcher, "pai_master_leader")) == (1.0, 0.0)

        # The standby's launcher, and the API workers of either master, send an agent to the leading launcher.
        for url in (b_launcher, b_url, c.url):
            status, body = agent_post(url, "/api/internal/agents/node-a/heartbeat")
            assert (status, body["code"], body["leader"]) == (503, "NotLeaderError", c.launcher_url), (url, body)

        # A token revoked through one master is refused at once by the other's API workers (each of them).
        token = MasterApi(HttpClient(b_url, timeout=10)).login("admin", ADMIN_PASSWORD)["token"]
        other = MasterApi(HttpClient(c.url, timeout=10, token=token))
        assert [other.http.json("GET", "/api/v2/users/admin")["username"] for _ in range(4)] == ["admin"] * 4
        c.api.http.json("DELETE", f"/api/v2/tokens/{token}")
        for url in (c.url, b_url):
            for _ in range(4):  # a new connection each: whichever worker takes it
                status, body = get_status(url, "/api/v2/users/admin", token)
                assert (status, body["code"]) == (401, "UnauthorizedUserError"), (url, body)

        # A job submitted to the standby is stored there and run by the leader.
        key = str(b.submit(job("via-standby").encode(), "application/json")["jobName"])
        assert c.wait_state(key, {"SUCCEEDED", "FAILED"}, 30)["jobStatus"]["state"] == "SUCCEEDED"

        # SIGKILL the leader: the standby leads within the lease, at the next epoch.
        epoch = b.masters()[0]["epoch"]
        os.killpg(c.procs["master"].pid, signal.SIGKILL)
        killed = time.monotonic()
        wait_for("the standby leads", lambda: (b_url, "leader", True) in roles(b), 3 * LEASE_SECONDS)
        took = time.monotonic() - killed
        # its session gone, the leader's liveness lock goes at once: the standby does not wait for the lease to run out
        assert took < LEASE_SECONDS - 1.0, took
        assert metric(b_launcher, "pai_master_leader") == 1.0 and metric(b_launcher, "pai_master_epoch") == epoch + 1
        status, body = agent_post(b_launcher, "/api/internal/agents/node-a/heartbeat")
        assert status != 503, body  # the new leader answers agents (this node must register with it first)

        # An agent pointed at the new leader runs what is submitted to it.
        c.kill("node-a")
        c.spawn_agent("node-a", "127.0.0.2", 2, master_url=b_url)
        key = str(b.submit(job("after-failover").encode(), "application/json")["jobName"])
        wait_for("the job ends", lambda: b.job(key)["jobStatus"]["state"] in {"SUCCEEDED", "FAILED"}, 60)
        assert b.job(key)["jobStatus"]["state"] == "SUCCEEDED"


def test_a_second_master_on_one_sqlite_file_is_refused_and_the_first_keeps_running(tmp_path: Path) -> None:
    with cluster(tmp_path, None, []) as c:
        port = free_port()
        second = subprocess.run([sys.executable, "-m", "pai", "master", "--port", str(port), "--data-dir",
                                 str(tmp_path / "master")], capture_output=True, text=True, timeout=60, env=c.env)
        assert second.returncode == 1, second.stdout + second.stderr
        errors = [line for line in second.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and f"{c.url} holds its lease" in errors[0], second.stderr
        assert c.api.http.json("GET", "/healthz")["status"] == "ok"
        assert [(m["url"], m["role"]) for m in c.api.masters()] == [(c.url, "leader")]


def test_agents_given_both_masters_keep_their_running_task_across_the_leaders_death(tmp_path: Path) -> None:
    """The issue's bar: two masters on one database, two agents given both; SIGKILL the leader mid-run: the running
    job succeeds with its task started once, and a job submitted to the standby right after the kill succeeds."""
    starts = tmp_path / "starts"
    starts.mkdir()
    with database_url("postgresql", tmp_path) as db, \
            cluster(tmp_path, db, [("node-a", "127.0.0.2", 1), ("node-b", "127.0.0.3", 1)], master_args=LEASE) as c:
        b_url, b = start_standby(c, db)
        wait_for("both masters listed", lambda: len(b.masters()) == 2, 10)
        for name, address in (("node-a", "127.0.0.2"), ("node-b", "127.0.0.3")):  # given both, the leader first
            c.kill(name)
            c.spawn_agent(name, address, 1, master_url=f"{c.url},{b_url}")
        wait_for("both agents READY again", lambda: {"node-a", "node-b"} <= c.ready_nodes(), 30)
        running = json.dumps({"jobName": "long", "image": "busybox", "taskRoles": [
            {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
             "command": f"echo $PAI_TASK_INDEX >> {starts}/long; sleep 8; echo done"}]})
        key = c.submit(running)
        c.wait_state(key, {"RUNNING"}, 30)
        wait_for("the task started", lambda: (starts / "long").exists(), 30)

        os.killpg(c.procs["master"].pid, signal.SIGKILL)
        killed = time.monotonic()
        fresh = str(b.submit(job("right-after").encode(), "application/json")["jobName"])  # to the standby
        wait_for("the fresh job runs", lambda: b.job(fresh)["jobStatus"]["state"] in {"RUNNING", "SUCCEEDED"}, 15)
        took = time.monotonic() - killed
        assert took <= 15.0, took
        for k in (key, fresh):
            wait_for(f"{k} ends", lambda k=k: b.job(k)["jobStatus"]["state"] in {"SUCCEEDED", "FAILED", "STOPPED"}, 60)
            assert b.job(k)["jobStatus"]["state"] == "SUCCEEDED", b.job(k)
        assert (starts / "long").read_text().splitlines() == ["0"]  # started once: not restarted, not run twice
        assert b.job(key)["jobStatus"]["retries"] == 0
        for name in ("node-a", "node-b"):
            assert "following master" in c.logs[name].read_text()
