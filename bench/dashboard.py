"""Dashboard benchmark: ``python bench/dashboard.py [--database sqlite|postgresql] [--workers W] [--jobs N]
[--nodes M] [--runs R]``.

Stores N finished jobs (default 100,000, as ``bench/api_lists.py`` does), starts the real ``pai master`` on them
(on PostgreSQL the launcher's process and W API workers, default 2), registers M nodes of 8 GPUs (default 100)
with its launcher, and measures in headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright) R times
each (default 7, each in a fresh browser context: nothing cached, the page's modules fetched):

  jobs page, first render   from navigating to ``/#/jobs`` until its 20 rows are in the document
  jobs page, next page      from a click on "Older" until the next 20 rows replace them
  jobs page, from another   from a click on "Jobs" in the header (the page's modules already loaded) until its rows
  cluster page, first render from navigating to ``/#/cluster`` until every node's tile is in the document

A row or tile is seen by a MutationObserver the moment the page inserts it (``performance.now()``, since the
navigation or the click). Printed: p50 and p90 of each, and p50 of every API call the page made meanwhile (the
browser's own request timing: request sent to response end). Figures, not assertions. Target: each render well
under a second with 100,000 jobs stored.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api_lists import AGENT_TOKEN, MASTER_ENV, PASSWORD, store
from bench.figures import pct
from bench.master import master_process, wait_healthy
from tests.dbkit import database_url

CHROMIUM = "/usr/bin/chromium"
# Records when rows of the job list and node tiles first appear, and the first row's key each time it changes.
OBSERVER = """
window.__seen = {rows: [], tiles: null};
new MutationObserver(() => {
  const first = document.querySelector("tbody tr[data-key]");
  const rows = window.__seen.rows, key = first && first.dataset.key;
  if (key && (!rows.length || rows[rows.length - 1].key !== key))
    rows.push({key, at: performance.now(), count: document.querySelectorAll("tbody tr[data-key]").length});
  if (window.__seen.tiles === null && document.querySelectorAll(".node-tile").length >= window.__wantTiles)
    window.__seen.tiles = performance.now();
}).observe(document, {subtree: true, childList: true});
"""


def call(base: str, method: str, path: str, body: Any, token: str) -> Any:
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def register_nodes(base: str, n: int) -> None:
    """Register ``n`` nodes with the launcher at ``base`` (the agents' endpoints)."""
    for i in range(n):
        node = {"name": f"gpu-{i:03d}", "address": f"10.0.{i // 250}.{i % 250 + 1}", "gpuType": "A100",
                "resources": {"gpu": 8, "cpu": 64, "memoryMB": 512_000}}
        call(base, "POST", "/api/internal/agents/register", {"version": 1, "node": node}, AGENT_TOKEN)


class Run:
    """One fresh browser context signed in as the admin, its API calls recorded by path."""

    def __init__(self, browser: Any, base: str, token: str, tiles: int) -> None:
        self.base = base
        # bypass_csp: the page forbids eval, which Playwright's wait_for_function uses
        self.context = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True)
        session = json.dumps({"token": token, "user": "admin", "admin": True})
        self.context.add_init_script(f"sessionStorage.setItem('pai.session', {json.dumps(session)});"
                                     f"window.__wantTiles = {tiles};" + OBSERVER)
        self.page = self.context.new_page()
        self.calls: dict[str, list[float]] = defaultdict(list)
        self.page.on("requestfinished", self._finished)

    def _finished(self, request: Any) -> None:
        path = request.url.removeprefix(self.base).split("?")[0]
        if path.startswith("/api/"):
            timing = request.timing
            self.calls[path].append((timing["responseEnd"] - timing["requestStart"]) / 1000)

    def rows(self, after: int = 0) -> dict[str, Any]:
        """The first render of the job list after ``after`` renders seen, once it shows 20 rows."""
        self.page.wait_for_function(f"window.__seen.rows.length > {after} && window.__seen.rows[{after}].count >= 20")
        return dict(self.page.evaluate(f"window.__seen.rows[{after}]"))

    def close(self) -> None:
        self.context.close()


def measure(browser: Any, base: str, token: str, tiles: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    run = Run(browser, base, token, tiles)
    try:
        figures: dict[str, float] = {}
        run.page.goto(base + "/#/jobs")
        figures["jobs page, first render"] = run.rows()["at"] / 1000
        clicked = run.page.evaluate("""() => { const b = [...document.querySelectorAll(".pager button")]
            .find((x) => x.textContent.includes("Older")); const t = performance.now(); b.click(); return t; }""")
        figures["jobs page, next page"] = (run.rows(1)["at"] - clicked) / 1000
        run.page.click("nav a[data-page=cluster]")
        run.page.wait_for_selector(".node-tile")
        clicked = run.page.evaluate("""() => { const t = performance.now();
            document.querySelector("nav a[data-page=jobs]").click(); return t; }""")
        figures["jobs page, from another"] = (run.rows(2)["at"] - clicked) / 1000
        calls = run.calls
    finally:
        run.close()
    run = Run(browser, base, token, tiles)
    try:
        run.page.goto(base + "/#/cluster")
        run.page.wait_for_function("window.__seen.tiles !== null")
        figures["cluster page, first render"] = float(run.page.evaluate("window.__seen.tiles")) / 1000
        for path, took in run.calls.items():
            calls[path].extend(took)
    finally:
        run.close()
    return figures, calls


def report(samples: list[dict[str, float]], calls: dict[str, list[float]]) -> None:
    for name in samples[0]:
        values = [s[name] for s in samples]
        print(f"  {name:<30} p50 {statistics.median(values) * 1000:7.1f} ms   p90 {pct(values, 0.9) * 1000:7.1f} ms")
    print("  API calls the pages made (request sent to response end):")
    for path, took in sorted(calls.items()):
        print(f"    {path:<44} p50 {statistics.median(took) * 1000:7.1f} ms   (n={len(took)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--workers", type=int, default=2, help="PostgreSQL: API worker processes (default 2)")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp, database_url(args.database, Path(tmp)) as url:
        took, _ = store(url, args.jobs)
        print(f"{args.database}: stored {args.jobs:,} finished jobs in {took:.1f} s")
        workers = args.workers if args.database == "postgresql" else 0
        with master_process(Path(tmp), url, workers, MASTER_ENV) as master:
            base = master.url
            asyncio.run(wait_healthy(base, master.proc, master.log))
            login = urllib.request.Request(base + "/api/v2/authn/basic/login", method="POST",
                                           data=json.dumps({"username": "admin", "password": PASSWORD}).encode(),
                                           headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(login, timeout=30) as resp:
                token = json.loads(resp.read())["token"]
            register_nodes(master.launcher_url, args.nodes)
            print(f"{args.nodes} nodes of 8 GPUs registered; {args.runs} runs, each in a fresh browser context")
            samples: list[dict[str, float]] = []
            calls: dict[str, list[float]] = defaultdict(list)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
                measure(browser, base, token, args.nodes)  # a warm-up: the master's first reads, Chromium's start
                for _ in range(args.runs):
                    figures, made = measure(browser, base, token, args.nodes)
                    samples.append(figures)
                    for path, t in made.items():
                        calls[path].extend(t)
                browser.close()
            report(samples, calls)


if __name__ == "__main__":
    main()
