"""The dashboard's submit page (#/submit) in real headless Chromium against a real master and agent (process runtime,
4 GPUs by configuration).

A user who is no admin, granted VCs default and team, opens the page from the header: the VC picker shows both with
what they have free and how many jobs wait in each; a template fills the editor and the master accepts it as it is
(a dry run); choosing VC team writes it into the document; an experiment's template goes to the experiments API. A
broken document is refused as it is typed, its error marked at its line, and Submit sends nothing that is stored;
the fixed one is submitted and its job page opens. A job page's Clone opens the page filled in with the job's config
under a new name, submitted as a new job. Screenshots under ``$PAI_TEST_ARTIFACTS/dashboard``; no JavaScript error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from pai.cli.api import JobFilters, MasterApi
from pai.cli.http import HttpClient
from tests.e2e.browser import WAIT_MS, shot, sign_in
from tests.e2e.harness import Cluster, cluster

ALICE = ("alice", "alice-password")
TOO_BIG = """protocolVersion: 2
name: {name}
type: job
prerequisites:
  - {{type: dockerimage, name: img, uri: busybox}}
taskRoles:
  worker:
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 8}}
    commands: ["sleep 600"]
"""  # 8 GPUs: more than the cluster has; it waits
BROKEN = """protocolVersion: 2
name: hello-v2
type: job
prerequisites:
  - {type: dockerimage, name: img, uri: busybox}
taskRoles:
  worker:
    instances: 1
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: -1}
    commands: ["true"]
defaults:
  virtualCluster: team
"""
BROKEN_LINE = 10  # resourcePerInstance


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory, pw: Any) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("dashboard-submit"), None, [("node-a", "127.0.0.2", 4)],
                 agent_args=("--runtime", "process", "--gpus", "4")) as c:
        c.api.create_user({"username": ALICE[0], "password": ALICE[1]})
        c.api.http.json("PUT", "/api/v2/virtual-clusters/team", payload={"vcCapacity": 50})
        c.api.user_call("PUT", ALICE[0], "group", {"groupname": "team"})
        yield c


def as_alice(c: Cluster) -> MasterApi:
    api = MasterApi(HttpClient(c.url, timeout=10))
    api.http.token = api.login(*ALICE)["token"]
    return api


def alices_jobs(api: MasterApi) -> list[str]:
    return sorted(j["name"] for j in api.list_jobs(JobFilters(username=ALICE[0])))


def test_a_job_from_a_template_is_checked_as_typed_refused_at_its_line_then_submitted(dash: Cluster, page: Any,
                                                                                     pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    alice = as_alice(dash)
    alice.submit(TOO_BIG.format(name="waits").encode(), "text/yaml")  # one job in default's queue
    before = alices_jobs(alice)
    sign_in(page, dash.url, *ALICE, expect)
    page.click("nav a[data-page=submit]")
    expect(page.locator("h1")).to_have_text("Submit a job")
    expect(page.locator("#vc option[value=default]")).to_contain_text("free 4 GPU")
    expect(page.locator("#vc option[value=default]")).to_contain_text("1 waiting")
    expect(page.locator("#vc option[value=team]")).to_contain_text("0 waiting")

    page.select_option("#template", "hello-v2")
    editor = page.locator(".editor textarea")
    expect(editor).to_have_value(re.compile(r"^name: hello-v2$", re.M))
    check = page.locator("#check")
    expect(check).to_have_attribute("data-state", "ok")
    expect(check).to_contain_text("alice~hello-v2")
    expect(page.locator("#vc")).to_have_value("default")  # the document's own
    page.select_option("#vc", "team")
    expect(editor).to_have_value(re.compile(r"^defaults:\n  virtualCluster: team$", re.M))
    expect(check).to_have_attribute("data-state", "ok")

    page.select_option("#template", "experiment")  # an experiment goes to its own API
    expect(page.locator("#target")).to_contain_text("POST /api/v2/experiments")
    expect(check).to_contain_text("alice~lr-search")
    text = editor.input_value()  # its trials' VC is near its end: the error's line is scrolled to, band and all
    line = text.splitlines().index("    virtualCluster: default") + 1
    editor.fill(text.replace("    virtualCluster: default", "    virtualCluster: nope"))
    expect(check).to_have_attribute("data-line", str(line))
    page.click("#check button.link-line")
    marked = page.locator(".editor .gutter-lines .marked")
    expect(marked).to_have_attribute("data-line", str(line))
    expect(marked).to_be_in_viewport()
    row, band, box = (page.locator(s).bounding_box() for s in (".editor .gutter-lines .marked", ".editor .band",
                                                               ".editor"))
    assert row and band and box and abs(row["y"] - band["y"]) < 2 and box["y"] < band["y"] < box["y"] + box["height"]

    editor.fill(BROKEN)
    expect(check).to_have_attribute("data-state", "error")
    expect(check).to_contain_text("taskRoles.worker.resourcePerInstance.gpu")
    expect(marked).to_have_count(1)
    expect(marked).to_have_attribute("data-line", str(BROKEN_LINE))
    expect(page.locator(".editor .band")).to_be_visible()
    shot(page, "submit-error")
    page.click("#submit")  # refused as the dry run was: the same line marked, nothing stored
    expect(check).to_have_attribute("data-state", "error")  # "submitting" until the master answers
    expect(check).to_have_attribute("data-line", str(BROKEN_LINE))
    expect(marked).to_have_attribute("data-line", str(BROKEN_LINE))
    assert alices_jobs(alice) == before

    editor.fill(BROKEN.replace("gpu: -1", "gpu: 0"))
    expect(check).to_have_attribute("data-state", "ok")
    expect(marked).to_have_count(0)
    shot(page, "submit")
    page.click("#submit")
    expect(page.locator("h1")).to_contain_text("alice~hello-v2")
    assert alices_jobs(alice) == sorted([*before, "hello-v2"])
    assert dash.job("alice~hello-v2")["jobStatus"]["virtualCluster"] == "team"


def test_clone_opens_the_page_filled_in_with_the_jobs_config(dash: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    alice = as_alice(dash)
    alice.submit(TOO_BIG.format(name="original").encode(), "text/yaml")
    sign_in(page, dash.url, *ALICE, expect)
    page.goto(f"{dash.url}/#/jobs/alice~original")
    page.click("#clone")
    expect(page).to_have_url(re.compile(r"#/submit\?clone=alice~original$"))
    editor = page.locator(".editor textarea")
    expect(editor).to_have_value(re.compile(r"^name: original-clone-\w+$", re.M))
    expect(editor).to_have_value(re.compile(r"gpu: 8"))  # the job's own config
    expect(page.locator("#check")).to_have_attribute("data-state", "ok")
    # 8 GPUs on a cluster of 4: accepted with a warning that says so, by the dry run and by the submission
    expect(page.locator("#check .warnings")).to_contain_text("resourcePerInstance.gpu")
    shot(page, "submit-clone")
    page.click("#submit")
    expect(page.locator("#submitted .warnings")).to_contain_text("resourcePerInstance.gpu")
    page.click(".submitted h2 a")
    expect(page.locator("h1")).to_contain_text("alice~original-clone-")
    clone = page.locator("h1").inner_text().split()[0]
    assert dash.job(clone)["jobStatus"]["username"] == ALICE[0]


def test_a_v1_json_template_by_its_link_takes_the_vc_picked_and_is_submitted(dash: Cluster, page: Any,
                                                                            pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    sign_in(page, dash.url, *ALICE, expect)
    page.goto(f"{dash.url}/#/submit?template=hello-v1")
    editor = page.locator(".editor textarea")
    expect(editor).to_have_value(re.compile(r'"jobName": "hello-v1"'))
    expect(page.locator("#target")).to_have_text("a v1 job (JSON) → POST /api/v2/jobs")
    expect(page.locator("#check")).to_have_attribute("data-state", "ok")
    page.select_option("#vc", "team")
    expect(editor).to_have_value(re.compile(r'^  "virtualCluster": "team",$', re.M))  # v1's own field
    expect(page.locator("#check")).to_have_attribute("data-state", "ok")
    page.click("#submit")
    expect(page.locator("h1")).to_contain_text("alice~hello-v1")
    assert dash.job("alice~hello-v1")["jobStatus"]["virtualCluster"] == "team"
