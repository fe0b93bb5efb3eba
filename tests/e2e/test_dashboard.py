"""The dashboard in real headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright from PyPI; no browser
download) against a real master with two agents (process runtime, 4 GPUs each by configuration).

A user who is no admin signs in, sees both agents on the cluster page, the running job on the jobs page and on its
VC's page (with the usage chart drawn from the master's samples), opens the job, reads its stdout as it grows, stops
it as its owner and clones it; an admin cordons and uncordons a node from the nodes page, and sees a node turn LOST
once its agent is killed. Every page is saved as a screenshot under ``$PAI_TEST_ARTIFACTS/dashboard`` (default
``test-artifacts/dashboard`` in the repository). No page may throw a JavaScript error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.e2e.browser import WAIT_MS, shot, sign_in
from tests.e2e.harness import ADMIN_PASSWORD, Cluster, cluster, wait_for

ALICE = ("alice", "alice-password")

TICKER = """protocolVersion: 2
name: {name}
type: job
prerequisites:
  - {{type: dockerimage, name: img, uri: busybox}}
taskRoles:
  worker:
    instances: 1
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 1}}
    commands:
      - 'i=0; while true; do i=$((i+1)); echo "tick $i"; echo "warn $i" >&2; sleep 0.3; done'
"""


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory, pw: Any) -> Iterator[Cluster]:
    agents = [("node-a", "127.0.0.2", 4), ("node-b", "127.0.0.3", 4)]
    with cluster(tmp_path_factory.mktemp("dashboard"), None, agents,
                 master_args=("--node-timeout", "3", "--fence-grace", "1", "--usage-sample-seconds", "1"),
                 agent_args=("--runtime", "process", "--gpus", "4")) as c:
        c.api.create_user({"username": ALICE[0], "password": ALICE[1]})
        yield c


def as_alice(c: Cluster) -> MasterApi:
    api = MasterApi(HttpClient(c.url, timeout=10))
    api.http.token = api.login(*ALICE)["token"]
    return api


def test_a_user_follows_their_job_live_then_stops_and_clones_it(dash: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    alice = as_alice(dash)
    key = alice.submit(TICKER.format(name="ticker").encode(), "text/yaml")["jobName"]
    dash.wait_state(key, {"RUNNING"})

    sign_in(page, dash.url, *ALICE, expect, screenshot=True)
    for node in ("node-a", "node-b"):  # the cluster page: both agents, READY, on the map
        expect(page.locator(f".node-tile[data-node={node}] .badge")).to_have_text("READY")
    expect(page.locator(".node-tile .gpu.used")).to_have_count(1)  # the job's one GPU
    expect(page.locator("#card-jobs")).to_contain_text("1 running")
    shot(page, "cluster")

    page.click("nav a[data-page=nodes]")
    expect(page.locator("tr[data-node=node-a]")).to_contain_text("127.0.0.2")
    expect(page.locator("tr[data-node=node-b]")).to_contain_text("127.0.0.3")
    expect(page.locator("tbody")).to_contain_text(key)  # the task on its node
    expect(page.locator("button[data-action]")).to_have_count(0)  # no admin action for alice
    shot(page, "nodes")

    page.click("nav a[data-page=vcs]")
    expect(page.locator(".vc-summary[data-vc=default]")).to_be_visible()
    expect(page.locator("figure.chart svg path.used").first).to_be_attached()  # the master samples every second
    expect(page.locator("section.panel", has_text="Running jobs")).to_contain_text(key)
    shot(page, "vcs")

    page.click("nav a[data-page=jobs]")
    row = page.locator(f"tr[data-key='{key}']")
    expect(row.locator(".badge")).to_have_text("RUNNING")
    shot(page, "jobs")

    row.locator("a").click()
    expect(page.locator("h1")).to_contain_text(key)
    stdout = page.locator("pre.log[data-stream=stdout]")
    expect(stdout).to_contain_text(re.compile(r"tick \d+"))
    seen = max(int(n) for n in re.findall(r"tick (\d+)", stdout.inner_text()))
    expect(stdout).to_contain_text(f"tick {seen + 3}")  # it follows the output as it grows
    expect(page.locator("pre.log[data-stream=stderr]")).to_contain_text(re.compile(r"warn \d+"))
    expect(page.locator("tr[data-task=worker-0]")).to_contain_text("node-")
    shot(page, "job")

    page.click("#stop")
    expect(page.locator("h1 .badge")).to_have_text("STOPPED")
    expect(page.locator("#stop")).to_have_count(0)
    assert dash.job(key)["jobStatus"]["state"] == "STOPPED"
    expect(page.locator("section.panel", has_text="History")).to_contain_text("stop")

    page.click("#clone")  # the submit page, filled in (tests/e2e/test_dashboard_submit.py)
    editor = page.locator(".editor textarea")
    expect(editor).to_have_value(re.compile(r"^name: ticker-clone-\w+$", re.M))
    shot(page, "clone")
    page.click("#submit")
    expect(page.locator("h1")).to_contain_text(f"{ALICE[0]}~ticker-clone-")
    clone = page.locator("h1").inner_text().split()[0]
    expect(page.locator("h1 .badge")).to_have_text(re.compile("WAITING|RUNNING"))
    page.click("#stop")
    expect(page.locator("h1 .badge")).to_have_text("STOPPED")
    assert dash.job(clone)["jobStatus"]["username"] == ALICE[0]


def test_an_admin_cordons_a_node_and_sees_a_killed_agent_lost(dash: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    sign_in(page, dash.url, "admin", ADMIN_PASSWORD, expect)
    page.click("nav a[data-page=nodes]")
    node_b = page.locator("tr[data-node=node-b]")
    node_b.locator("button[data-action=CORDONED]").click()
    expect(node_b.locator(".badge")).to_have_text("CORDONED")
    assert {n["name"]: n["state"] for n in dash.api.nodes()}["node-b"] == "CORDONED"
    node_b.locator("button[data-action=READY]").click()
    expect(node_b.locator(".badge")).to_have_text("READY")
    shot(page, "nodes-admin")

    dash.kill("node-b")
    expect(node_b.locator(".badge")).to_have_text("LOST")
    expect(node_b.locator("button[data-action]")).to_have_count(0)
    page.click("nav a[data-page=cluster]")
    expect(page.locator(".node-tile[data-node=node-b] .badge")).to_have_text("LOST")
    expect(page.locator(".node-tile[data-node=node-b] .gpu.off")).to_have_count(4)
    expect(page.locator("#card-nodes")).to_contain_text("1 lost")
    wait_for("node-a still READY", lambda: "node-a" in dash.ready_nodes())
    shot(page, "cluster-lost")
