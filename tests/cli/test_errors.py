"""Failures are one line on stderr with exit code 1 (2 for usage errors), never a traceback."""

from __future__ import annotations

import socket

import pytest

from pai.cli.main import cli

from .conftest import Run
from .fake_master import FakeMaster


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_connection_refused_names_the_master(run: Run) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    result = run("jobs", "--master", url, "--all")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"error: cannot reach the master at {url}: Connection refused\n"


def test_master_url_from_the_environment_without_scheme(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    port = closed_port()
    monkeypatch.setenv("PAI_MASTER_URL", f"127.0.0.1:{port}")
    result = run("nodes")
    assert result.stderr == f"error: cannot reach the master at http://127.0.0.1:{port}: Connection refused\n"


def test_non_json_error_body_uses_the_status(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("GET", "/api/v2/nodes", status=502, text="bad gateway\nmore detail")
    result = run("nodes")
    assert (result.exit_code, result.stderr) == (1, "error: HTTP 502: bad gateway\n")


def test_non_json_success_body_is_an_unexpected_answer(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("GET", "/api/v2/nodes", text="<html>hello</html>", content_type="text/html")
    result = run("nodes")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: unexpected answer from the master to GET {logged_in.url}/api/v2/nodes: not JSON (text/html)\n"
    )


def test_answer_of_an_unexpected_shape_is_an_internal_error_not_a_traceback(
    run: Run, logged_in: FakeMaster
) -> None:
    logged_in.reply("GET", "/api/v2/jobs/admin~mnist", ["not", "a", "detail"])
    result = run("job", "show", "mnist")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: internal error: AttributeError: ")
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["jobs", "--bogus"], id="unknown-option"),
        pytest.param(["jobs", "-o", "xml"], id="bad-output-format"),
        pytest.param(["logs"], id="missing-argument"),
        pytest.param(["logs", "x", "--index", "-1"], id="negative-index"),
        pytest.param(["frobnicate"], id="unknown-command"),
    ],
)
def test_usage_errors_exit_2(run: Run, logged_in: FakeMaster, args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert "Usage:" in result.stderr
    assert logged_in.requests == []


def test_group_accepts_more_commands() -> None:
    import click

    assert isinstance(cli, click.Group)
    assert {"login", "logout", "submit", "jobs", "job", "logs", "stop", "nodes"} <= set(cli.commands)
