"""A job's page tells the truth, in real headless Chromium against a real master and agent (process runtime, 2 GPUs
by configuration): a task's GPUs are counted, with their indices beside; a waiting job shows the scheduler's reason
as a sentence (its figures, the unblock hint's included, as words behind a toggle, never raw JSON); a failed job's
output opens on the task whose exit failed it; a job that does not exist is said to be missing, with nothing else on
the page; and the page asks for no log of a task that has not started (no 404 in the browser's console).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.e2e.browser import WAIT_MS, shot, sign_in
from tests.e2e.harness import Cluster, cluster, wait_for

ALICE = ("alice", "alice-password")

ROLE = """  {role}:
    instances: {instances}
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: {gpu}}}
    commands:
      - {command}
"""
HEAD = """protocolVersion: 2
name: {name}
type: job
prerequisites:
  - {{type: dockerimage, name: img, uri: busybox}}
taskRoles:
"""
# worker[1] says why and fails; the job fails with it (the other tasks are stopped)
FAILS = "'if [ \"$PAI_TASK_INDEX\" = 1 ]; then echo \"worker 1 breaks\"; echo \"boom\" >&2; exit 3; fi; sleep 600'"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, pw: Any) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("job-page"), None, [("node-a", "127.0.0.2", 6)],
                 agent_args=("--runtime", "process", "--gpus", "2")) as c:
        c.api.create_user({"username": ALICE[0], "password": ALICE[1]})
        yield c


def alice(c: Cluster) -> MasterApi:
    api = MasterApi(HttpClient(c.url, timeout=10))
    api.http.token = api.login(*ALICE)["token"]
    return api


def submit(c: Cluster, name: str, *roles: tuple[str, int, int, str]) -> str:
    """A job of ``roles``: (name, instances, GPUs each, command)."""
    spec = HEAD.format(name=name) + "".join(
        ROLE.format(role=r, instances=n, gpu=g, command=cmd) for r, n, g, cmd in roles)
    return str(alice(c).submit(spec.encode(), "text/yaml")["jobName"])


def open_job(page: Any, c: Cluster, key: str, expect: Any) -> None:
    sign_in(page, c.url, *ALICE, expect)
    page.goto(f"{c.url}/#/jobs/{key}")
    expect(page.locator("h1")).to_contain_text(key)


def refreshes(page: Any, key: str, n: int) -> None:
    """Wait for the page to read the job ``n`` more times (it does every 2 s)."""
    for _ in range(n):
        page.wait_for_event("request", lambda r: r.url.endswith(f"/api/v2/jobs/{key}"), timeout=WAIT_MS)


def cell(page: Any, expect: Any, task: str, column: str) -> Any:
    """The cell of a task's row under the column titled ``column``."""
    row = page.locator(f"tr[data-task={task}]")
    expect(row).to_be_visible()
    titles = row.locator("xpath=ancestor::table//th").all_text_contents()
    return row.locator("td").nth(titles.index(column))


def test_a_tasks_gpus_are_counted_with_their_indices(site: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    key = submit(site, "two-gpus", ("main", 1, 2, "'sleep 600'"))
    try:
        site.wait_state(key, {"RUNNING"})
        open_job(page, site, key, expect)
        expect(cell(page, expect, "main-0", "GPUs")).to_have_text("2 (#0, #1)")  # how many, then which
        shot(page, "job-gpus")
    finally:
        alice(site).stop_job(key)
        site.wait_state(key, {"STOPPED"})


def test_a_waiting_job_says_why_in_words_and_reads_no_log(site: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    holder = submit(site, "holder", ("main", 1, 1, "'sleep 600'"))
    key = submit(site, "waiter", ("main", 1, 2, "'echo never'"))  # 1 of the node's 2 GPUs stays free: it waits
    try:
        site.wait_state(holder, {"RUNNING"})

        def hinted() -> bool:
            reason = site.job(key)["jobStatus"]["waitingReason"] or {}
            return reason.get("code") == "NoNodeFits" and (reason["figures"].get("unblock") or {}).get(
                "kind") == "nodeGpus"

        wait_for("the waiting job's unblock hint", hinted)
        missing: list[str] = []
        page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        open_job(page, site, key, expect)
        expect(page.locator("pre.log[data-stream=stdout]")).to_have_text("No output yet: main[0] has not started.")
        refreshes(page, key, 3)
        assert missing == [], missing  # no log asked of a task that has not started (nor anything else missing)

        box = page.locator(".waiting")
        expect(box).to_contain_text("1 more GPU on node-a would do")  # the scheduler's sentence, with its hint
        expect(box.locator("p")).to_have_count(1)  # that sentence only; no debug line under it
        details = box.locator("details")
        expect(details).not_to_have_attribute("open", "")  # the figures are behind a toggle
        details.locator("summary").click()
        expect(details).to_contain_text("NoNodeFits")
        expect(details.get_by_text("alice~holder", exact=True)).to_be_visible()  # the job whose exit would unblock
        text = box.inner_text()
        assert not any(c in text for c in '{}[]"'), text  # words and values, no JSON
        shot(page, "job-waiting")
    finally:
        for k in (key, holder):
            alice(site).stop_job(k)


def test_a_task_placed_and_not_yet_running_is_not_read(site: Cluster, page: Any, pw: Any) -> None:
    """The agent is frozen (SIGSTOP) so that the task it is given stays placed, with its attempt, and does not run:
    the page asks for no log of it (the old page followed it, and the agent answered 404 for a log not written yet);
    once the agent goes on and the task runs, its output is followed."""
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    logs: list[str] = []
    page.on("request", lambda r: logs.append(r.url) if "/logs/" in r.url else None)
    agent = site.procs["node-a"]
    agent.send_signal(signal.SIGSTOP)
    try:
        key = submit(site, "placed", ("main", 1, 0, "'echo out-of-placed; sleep 600'"))

        def placed() -> bool:
            task = site.job(key)["taskRoles"]["main"]["taskStatuses"][0]
            return bool(task["containerId"]) and task["taskState"] == "WAITING"

        wait_for("the task placed, not running", placed)
        open_job(page, site, key, expect)
        refreshes(page, key, 3)
        assert placed() and logs == [], logs  # still placed and not running; nothing of it read
    finally:
        agent.send_signal(signal.SIGCONT)
    try:
        site.wait_state(key, {"RUNNING"})
        expect(page.locator("pre.log[data-stream=stdout]")).to_contain_text("out-of-placed")
        assert any("follow=true" in u for u in logs), logs
    finally:
        alice(site).stop_job(key)


def test_a_failed_jobs_output_opens_on_the_task_that_failed_it(site: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    key = submit(site, "breaks", ("master", 1, 0, "'sleep 600'"), ("worker", 2, 0, FAILS))
    status = site.wait_state(key, {"FAILED"})["jobStatus"]
    assert (status["appExitTriggerTaskRoleName"], status["appExitTriggerTaskIndex"]) == ("worker", 1)
    open_job(page, site, key, expect)
    expect(page.locator(".logs select")).to_have_value("worker\u00001")
    expect(page.locator("pre.log[data-stream=stdout]")).to_contain_text("worker 1 breaks")
    expect(page.locator("pre.log[data-stream=stderr]")).to_contain_text("boom")
    shot(page, "job-failed")
    page.locator(".logs select").select_option(label="master[0]")  # the reader's pick stays
    expect(page.locator("pre.log[data-stream=stderr]")).not_to_contain_text("boom")
    refreshes(page, key, 2)
    expect(page.locator(".logs select")).to_have_value("master\u00000")


def test_a_job_that_does_not_exist_is_said_to_be_missing(site: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    sign_in(page, site.url, *ALICE, expect)
    reads: list[str] = []
    page.on("request", lambda r: reads.append(r.url) if "/api/v2/jobs/" in r.url else None)
    page.goto(f"{site.url}/#/jobs/alice~nothing-here")
    message = page.locator(".missing")
    expect(message).to_contain_text("No such job")
    expect(message).to_contain_text("alice~nothing-here")
    expect(page.locator("#problem")).to_be_hidden()  # no red banner
    expect(page.locator("#page > *")).to_have_count(1)  # the message only: no tables, no log panes, no buttons
    shot(page, "job-missing")
    seen = len(reads)
    updated = page.locator("#updated")
    for _ in range(2):  # two more of the app's ticks: the missing job is not asked for again
        before = updated.inner_text()
        expect(updated).not_to_have_text(before)
    assert len(reads) == seen, reads
