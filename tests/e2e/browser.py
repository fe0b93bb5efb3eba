"""Real headless Chromium for the dashboard's tests (Debian's ``/usr/bin/chromium``, or ``$PAI_CHROMIUM``, driven by
Playwright from PyPI; no browser download): Playwright or a skip (a failure under CI=true), screenshots under
``$PAI_TEST_ARTIFACTS/dashboard`` (default ``test-artifacts/dashboard`` in the repository), signing in. The fixtures
``pw``, ``browser`` and ``page`` are in ``conftest.py``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("PAI_CHROMIUM", "/usr/bin/chromium"))
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("PAI_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "dashboard"
WAIT_MS = 20_000  # Playwright's expectations poll until then


def playwright() -> Any:
    """Playwright's sync API, with Chromium at ``CHROMIUM``; else skip (fail under CI=true)."""
    problem = None
    try:
        from playwright import sync_api
    except ImportError:
        problem = "playwright is not installed (pip install -e '.[dev]')"
    if problem is None and not CHROMIUM.exists():
        problem = f"{CHROMIUM} is missing (Debian: chromium); scripts/test.sh installs it"
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return sync_api


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def sign_in(page: Any, url: str, user: str, password: str, expect: Any, *, screenshot: bool = False) -> None:
    page.goto(url + "/")
    expect(page.locator("form.login")).to_be_visible()
    if screenshot:
        shot(page, "login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("form.login button[type=submit]")
    expect(page.locator("#who")).to_contain_text(user)
