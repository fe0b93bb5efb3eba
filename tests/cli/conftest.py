"""Fixtures of the CLI tests: a real fake master over HTTP, an isolated environment and config file."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest
from click.testing import CliRunner, Result

from pai.cli.main import cli

from .fake_master import FakeMaster, ServerThread

TOKEN = "tok-admin"


class Run(Protocol):
    def __call__(self, *args: str, input: str | None = None) -> Result: ...


@pytest.fixture(scope="session")
def _server() -> Iterator[FakeMaster]:
    master = FakeMaster()
    thread = ServerThread(master)
    thread.start()
    yield master
    thread.stop()


@pytest.fixture
def master(_server: FakeMaster) -> Iterator[FakeMaster]:
    _server.reset()
    yield _server
    _server.reset()


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    return tmp_path / "home" / "pai" / "config.json"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, config_file: Path) -> Iterator[None]:
    for name in ("PAI_TOKEN", "PAI_USER", "PAI_PASSWORD", "PAI_MASTER_URL", "PAI_DEBUG",
                 "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAI_CONFIG", str(config_file))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def logged_in(master: FakeMaster, config_file: Path) -> FakeMaster:
    """A config file as `pai login` leaves it: admin, logged in to the fake master."""
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(json.dumps({"master": master.url, "user": "admin", "token": TOKEN}))
    return master


@pytest.fixture
def run() -> Run:
    def invoke(*args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)

    return invoke
