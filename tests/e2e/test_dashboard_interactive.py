"""Into a running job from the dashboard, in real headless Chromium against a real master and agent (process
runtime): a task's output followed with one streaming read per stream (no polling) across its attempts, nothing read
for a task that has not started, a link for each labelled port of a running task (none once it ended), and the
TensorBoard example (examples/tensorboard.yaml, the venv's ``tensorboard``) opened through the master's proxy in a
new tab after the dashboard's link asked for the proxy's cookie: TensorBoard's page loads its data through the proxy.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.e2e.browser import ROOT, WAIT_MS, shot, sign_in
from tests.e2e.harness import Cluster, cluster, wait_for

ALICE = ("alice", "alice-password")
BIN = Path(sys.executable).parent  # the venv's tensorboard, on the agent's PATH (the process runtime's tasks use it)

JOB = """protocolVersion: 2
name: {name}
type: job
prerequisites:
  - {{type: dockerimage, name: img, uri: busybox}}
taskRoles:
  main:
    instances: 1
    dockerImage: img
    taskRetryCount: {retries}
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: {gpu}, ports: {{tensorboard: 1}}}}
    commands:
      - {command}
"""
# The first attempt says so and fails once the test lets it (a file it waits for); the second ticks.
FLAKY = ("'echo \"started $PAI_CONTAINER_ID\"; if mkdir {dir}/first 2>/dev/null; then "
         "while [ ! -e {dir}/go ]; do sleep 0.1; done; echo \"failing\"; exit 3; fi; "
         "i=0; while true; do i=$((i+1)); echo \"tick $i\"; echo \"warn $i\" >&2; sleep 0.3; done'")


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory, pw: Any) -> Iterator[Cluster]:
    with pytest.MonkeyPatch.context() as mp:  # the agent (and so its tasks) finds the venv's tensorboard
        mp.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        with cluster(tmp_path_factory.mktemp("interactive"), None, [("node-a", "127.0.0.2", 4)],
                     agent_args=("--runtime", "process", "--gpus", "2")) as c:
            c.api.create_user({"username": ALICE[0], "password": ALICE[1]})
            yield c


def alice(c: Cluster) -> MasterApi:
    api = MasterApi(HttpClient(c.url, timeout=10))
    api.http.token = api.login(*ALICE)["token"]
    return api


def submit(c: Cluster, name: str, command: str, *, gpu: int = 0, retries: int = 0) -> str:
    spec = JOB.format(name=name, command=command, gpu=gpu, retries=retries)
    return str(alice(c).submit(spec.encode(), "text/yaml")["jobName"])


def log_reads(page: Any) -> list[str]:
    """The URLs of every task log request the page makes, from now on."""
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url) if "/logs/std" in r.url else None)
    return seen


def open_job(page: Any, c: Cluster, key: str, expect: Any) -> None:
    sign_in(page, c.url, *ALICE, expect)
    page.goto(f"{c.url}/#/jobs/{key}")
    expect(page.locator("h1")).to_contain_text(key)


def test_a_tasks_output_is_followed_by_one_streaming_read_across_its_attempts(
        web: Cluster, page: Any, pw: Any, tmp_path: Path) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    key = submit(web, "flaky", FLAKY.format(dir=tmp_path), retries=1)
    web.wait_state(key, {"RUNNING"})
    reads = log_reads(page)
    open_job(page, web, key, expect)
    stdout = page.locator("pre.log[data-stream=stdout]")
    expect(stdout).to_contain_text("started")
    (tmp_path / "go").touch()  # the first attempt fails now; the task's second attempt starts and ticks
    expect(stdout).to_contain_text("failing")
    expect(stdout).to_contain_text(re.compile(r"==> attempt .* <=="))
    expect(stdout).to_contain_text(re.compile(r"tick \d+"))
    seen = max(int(n) for n in re.findall(r"tick (\d+)", stdout.inner_text()))
    expect(stdout).to_contain_text(f"tick {seen + 3}")  # appended as written, after the page opened
    expect(page.locator("pre.log[data-stream=stderr]")).to_contain_text(re.compile(r"warn \d+"))
    text = stdout.inner_text()
    assert text.index("started") < text.index("failing") < text.index("==> attempt") < text.index("tick 1")
    shot(page, "job-follow")
    assert sorted(u.split("?")[0].rsplit("/", 1)[1] for u in reads) == ["stderr", "stdout"], reads
    assert all("follow=true" in u for u in reads), reads

    page.click("#stop")  # the task ends: the master ends the streams, and the dashboard reads no more
    expect(page.locator("h1 .badge")).to_have_text("STOPPED")
    expect(page.locator(".logs h3", has_text="stdout")).to_contain_text("ended")
    expect(page.locator(".logs h3", has_text="stderr")).to_contain_text("ended")
    refreshes(page, key, 3)
    assert len(reads) == 2, reads
    expect(stdout).to_contain_text(re.compile(r"tick \d+"))

    reads.clear()  # the page of a task that has ended reads each stream once, without following
    page.reload()
    expect(stdout).to_contain_text(re.compile(r"tick \d+"))
    refreshes(page, key, 3)
    assert sorted(u.split("?")[0].rsplit("/", 1)[1] for u in reads) == ["stderr", "stdout"], reads
    assert not any("follow" in u for u in reads), reads


def refreshes(page: Any, key: str, n: int) -> None:
    """Wait for the page to read the job ``n`` more times (it does every 2 s)."""
    for _ in range(n):
        page.wait_for_event("request", lambda r: r.url.endswith(f"/api/v2/jobs/{key}"), timeout=WAIT_MS)


def test_a_task_that_has_not_started_is_not_read(web: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    key = submit(web, "waits", "'echo never'", gpu=4)  # the node has 2 GPUs: it waits
    web.wait_state(key, {"WAITING"})
    reads = log_reads(page)
    open_job(page, web, key, expect)
    expect(page.locator("pre.log[data-stream=stdout]")).to_have_text("No output yet: main[0] has not started.")
    refreshes(page, key, 3)
    assert reads == []
    expect(page.locator("a.port-link")).to_have_count(0)
    alice(web).stop_job(key)


def test_a_running_tasks_labelled_ports_are_links_until_it_ends(web: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    key = submit(web, "ports", "'sleep 600'")
    web.wait_state(key, {"RUNNING"})
    open_job(page, web, key, expect)
    row = page.locator("tr[data-task=main-0]")
    expect(row.locator("a.port-link")).to_have_count(2)  # http and tensorboard; ssh is no web page
    base = f"/proxy/{key}/main/0"
    expect(row.locator("a.port-link[data-port=tensorboard]")).to_have_attribute("href", f"{base}/tensorboard/")
    expect(row.locator("a.port-link[data-port=http]")).to_have_attribute("href", f"{base}/http/")
    expect(row.locator("a.port-link[data-port=ssh]")).to_have_count(0)
    expect(row).to_contain_text(re.compile(r"ssh:\d+"))
    connect = page.locator("details.connect")
    connect.locator("summary").click()
    expect(connect).to_contain_text(f"pai exec -it {key} --role main --index 0 -- bash")
    expect(connect).to_contain_text(f"pai port-forward {key} 8080:tensorboard --role main --index 0")
    shot(page, "job-ports")
    page.click("#stop")
    expect(page.locator("h1 .badge")).to_have_text("STOPPED")
    expect(row.locator("a.port-link")).to_have_count(0)
    expect(page.locator("details.connect")).to_be_hidden()


def require_tensorboard() -> None:
    if shutil.which("tensorboard", path=str(BIN)) is None:
        problem = f"tensorboard is not installed in {BIN} (pip install -e '.[dev]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(problem)
        pytest.skip(problem)


def test_tensorboard_opens_through_the_masters_proxy_from_the_dashboard(web: Cluster, page: Any, pw: Any) -> None:
    require_tensorboard()
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    key = str(alice(web).submit((ROOT / "examples" / "tensorboard.yaml").read_bytes(), "text/yaml")["jobName"])
    web.wait_state(key, {"RUNNING"})
    prefix = f"/proxy/{key}/main/0/tensorboard/"

    def serving() -> bool:
        assert web.job(key)["jobStatus"]["state"] == "RUNNING", web.log(key, "main", 0, "stderr")[-2000:]
        return web.raw("GET", prefix + "data/runs")[0] == 200

    try:  # (a first start on a busy machine is slow; the page is not the test)
        wait_for("TensorBoard to answer through the proxy", serving, 120, 0.5)
    except AssertionError as e:
        raise AssertionError(f"{e}\nits stderr: {web.log(key, 'main', 0, 'stderr')[-2000:]}") from None
    open_job(page, web, key, expect)
    link = page.locator("tr[data-task=main-0] a.port-link[data-port=tensorboard]")
    with page.context.expect_page() as opened:
        link.click()
    tab = opened.value
    answers: list[tuple[str, int]] = []
    tab.on("response", lambda r: answers.append((r.url, r.status)))
    tab.wait_for_load_state()
    assert tab.url == f"{web.url}{prefix}"
    expect(tab.locator("body")).to_contain_text("loss", timeout=60_000)  # the scalar card of the curve it writes
    data = [(u, s) for u, s in answers if f"{prefix}data/" in u]
    assert data and all(s == 200 for _, s in data), data
    sent = tab.evaluate("document.cookie")  # HttpOnly: the page's scripts do not see the proxy's cookie
    assert "pai_proxy" not in sent
    shot(tab, "tensorboard")

    stranger = page.context.browser.new_context()  # no cookie, no token: the proxy refuses
    try:
        resp = stranger.new_page().goto(f"{web.url}{prefix}")
        assert resp is not None and resp.status == 401
    finally:
        stranger.close()
    alice(web).stop_job(key)
