"""The dashboard's experiment pages in real headless Chromium against a real master and agent (process runtime).

A user who is no admin creates a grid search of three trials; each trial is a real task that reads its learning
rate with ``pai_trial`` and reports six steps of ``loss`` once the test lets it (a file), then runs until stopped.
The experiment list shows it; its page follows the trials without a reload (the curves appear when they report):
one SVG line a trial with a dot a point, the best one highlighted and marked in the table, the table reordered by a
click on a header, one dot a trial against the learning rate; a trial's job page links back to it; Stop (confirmed)
stops it and its trials. Screenshots under ``$PAI_TEST_ARTIFACTS/dashboard``. No page may throw a JavaScript error.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.e2e.browser import WAIT_MS, shot, sign_in
from tests.e2e.harness import Cluster, cluster, wait_for

ALICE = ("alice", "alice-password")
KEY = "alice~lr"
STEPS = 6

TRIAL = """import math, os, time
import pai_trial
while not os.path.exists({go!r}):  # the test opens the page first, then lets the trials report
    time.sleep(0.1)
lr = pai_trial.hparams()["lr"]
for step in range({steps}):
    pai_trial.report(step, {{"loss": (1 + (math.log10(lr) + 2.2) ** 2) / (step + 1)}})
time.sleep(3600)  # running until the experiment is stopped
"""


def loss(lr: float, step: int) -> float:
    return (1 + (math.log10(lr) + 2.2) ** 2) / (step + 1)


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory, pw: Any) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("dashboard-experiments"), None, [("node-a", "127.0.0.2", 4)]) as c:
        c.api.create_user({"username": ALICE[0], "password": ALICE[1]})
        yield c


def experiment(script: Path) -> dict[str, Any]:
    return {
        "protocolVersion": 2, "name": "lr", "type": "experiment",
        "searcher": {"name": "grid", "metric": "loss", "maxTrials": 3, "maxConcurrentTrials": 3},
        "hyperparameters": {"lr": {"type": "log", "minval": 0.001, "maxval": 0.1, "count": 3},
                            "batch": {"type": "const", "val": 64}},
        "trial": {
            "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "busybox"}],
            "taskRoles": {"train": {
                "dockerImage": "img", "resourcePerInstance": {"cpu": 1, "gpu": 0, "memoryMB": 256},
                "commands": [f"{sys.executable} {script}"]}},
        },
    }


def rows(page: Any) -> list[int]:
    return [int(n) for n in page.locator("#trials tbody tr").evaluate_all("rs => rs.map(r => r.dataset.trial)")]


def test_a_user_follows_an_experiment_sorts_its_trials_and_stops_it(dash: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    alice = MasterApi(HttpClient(dash.url, timeout=10))
    token = alice.login(*ALICE)["token"]
    go = dash.tmp / "go"
    script = dash.tmp / "trial.py"
    script.write_text(TRIAL.format(go=str(go), steps=STEPS))
    status, body = dash.raw("POST", "/api/v2/experiments", json.dumps(experiment(script)).encode(),
                            "application/json", token=token)
    assert (status, body["experimentName"]) == (202, KEY), body

    def detail() -> dict[str, Any]:
        return dict(dash.raw("GET", f"/api/v2/experiments/{KEY}", token=token)[1])

    wait_for("three trials RUNNING", lambda: [t["state"] for t in detail()["trials"]] == ["RUNNING"] * 3, 60)

    sign_in(page, dash.url, *ALICE, expect)
    page.click("nav a[data-page=experiments]")
    row = page.locator(f"tr[data-key='{KEY}']")
    expect(row.locator(".badge")).to_have_text("ACTIVE")
    expect(row).to_contain_text("grid on loss")
    shot(page, "experiments")
    row.locator("a").click()
    expect(page.locator("h1 .badge")).to_have_text("ACTIVE")
    expect(page.locator("#curves")).to_contain_text("No trial has reported loss")

    go.write_text("")  # the page, not reloaded, follows the trials' reports
    wait_for("every trial's six points", lambda: [t["points"] for t in detail()["trials"]] == [STEPS] * 3, 60)
    trials = detail()["trials"]
    by_best = [t["number"] for t in sorted(trials, key=lambda t: t["best"]["value"])]
    best = by_best[0]
    assert next(t for t in trials if t["number"] == best)["hparams"]["lr"] == pytest.approx(0.01)
    curves = page.locator("figure.curves svg g.curve")
    expect(curves).to_have_count(3)
    for t in trials:
        expect(page.locator(f"figure.curves g.curve[data-trial='{t['number']}'] circle")).to_have_count(STEPS)
    expect(page.locator("figure.curves g.curve.best")).to_have_attribute("data-trial", str(best))
    expect(page.locator("figure.curves .legend-item.best")).to_contain_text(f"trial {best}")
    ys = [float(y) for y in page.locator(f"g.curve[data-trial='{best}'] circle").evaluate_all(
        "cs => cs.map(c => c.getAttribute('cy'))")]
    assert ys == sorted(ys), ys  # the loss falls with the steps: further down the chart, larger y

    expect(page.locator("tr.best")).to_have_attribute("data-trial", str(best))
    expect(page.locator("tr.best .best-mark")).to_have_text("best")
    expect(page.locator("tr.best")).to_contain_text(f"{loss(0.01, STEPS - 1):.4g}")
    assert rows(page) == by_best  # the default order: best loss first (smaller is better)
    page.click("button[data-sort=number]")
    expect(page.locator("button[data-sort=number]")).to_have_attribute("aria-sort", "ascending")
    assert rows(page) == [0, 1, 2]
    page.click("button[data-sort=number]")
    expect(page.locator("button[data-sort=number]")).to_have_attribute("aria-sort", "descending")
    assert rows(page) == [2, 1, 0]
    page.click("button[data-sort='hp:lr']")
    assert rows(page) == [t["number"] for t in sorted(trials, key=lambda t: t["hparams"]["lr"])]

    expect(page.locator("select[name=hparam]")).to_have_value("lr")
    expect(page.locator("figure.scatter circle.dot")).to_have_count(3)
    expect(page.locator("figure.scatter circle.dot.best")).to_have_attribute("data-trial", str(best))
    xs = {int(n): float(x) for n, x in page.locator("figure.scatter circle.dot").evaluate_all(
        "cs => cs.map(c => [c.dataset.trial, c.getAttribute('cx')])")}
    lrs = {t["number"]: t["hparams"]["lr"] for t in trials}
    low, mid, high = sorted(lrs, key=lambda n: lrs[n])
    assert xs[mid] - xs[low] == pytest.approx(xs[high] - xs[mid], abs=0.2)  # log scale: 0.001, 0.01, 0.1 evenly
    shot(page, "experiment")

    job = next(t["jobName"] for t in trials if t["number"] == best)
    page.locator(f"tr[data-trial='{best}'] a", has_text=job).click()
    expect(page.locator("h1")).to_contain_text(job)
    link = page.locator("#experiment")
    expect(link).to_contain_text(f"{KEY} trial {best}")
    link.locator("a").click()
    expect(page.locator("h1")).to_contain_text(KEY)

    page.on("dialog", lambda d: d.accept())  # Stop asks first
    page.click("#stop")
    expect(page.locator("h1 .badge")).to_have_text(re.compile("STOPPING|STOPPED"))
    expect(page.locator("#stop")).to_have_count(0)
    expect(page.locator("h1 .badge")).to_have_text("STOPPED")
    got = detail()
    assert got["state"] == "STOPPED" and {t["state"] for t in got["trials"]} == {"STOPPED"}
    expect(page.locator("#trials .stopped-by")).to_have_count(3)
    expect(page.locator("#trials")).to_contain_text(f"stopped by {got['trials'][0]['stoppedBy']}")
    shot(page, "experiment-stopped")
    page.click("nav a[data-page=experiments]")
    expect(page.locator(f"tr[data-key='{KEY}'] .badge")).to_have_text("STOPPED")
    expect(page.locator(f"tr[data-key='{KEY}']")).to_contain_text(f"{loss(0.01, STEPS - 1):.4g} trial {best}")
