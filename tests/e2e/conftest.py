from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dbkit import BACKENDS, database_url
from tests.e2e.browser import CHROMIUM, playwright
from tests.e2e.harness import Cluster, cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module", params=BACKENDS)
def two_agents(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A master and two agents with 2 CPUs each on 127.0.0.2 and 127.0.0.3."""
    tmp = tmp_path_factory.mktemp(f"cluster-{request.param}")
    config = tmp / "cluster.json"  # the examples' code (examples/torch_allreduce) may be a job's codeDir
    config.write_text(json.dumps({"localPaths": [{"path": str(EXAMPLES)}]}))
    with database_url(request.param, tmp) as url, cluster(
        tmp, url, [("node-a", "127.0.0.2", 2), ("node-b", "127.0.0.3", 2)], master_args=("--vc-config", str(config))
    ) as c:
        yield c


@pytest.fixture(scope="module")
def pw() -> Any:
    """Playwright's sync API (tests/e2e/browser.py), or a skip."""
    return playwright()


@pytest.fixture(scope="module")
def browser(pw: Any) -> Iterator[Any]:
    with pw.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (its own session storage and cookies); uncaught page errors fail the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"
