"""Attempt ids that may name files, and the key=value log format."""

from __future__ import annotations

import logging

import pytest

from pai.nodeagent.logfmt import KeyValueFormatter, bind
from pai.nodeagent.paths import AgentPaths, InvalidAttemptIdError, is_attempt_id


@pytest.mark.parametrize(
    ("attempt_id", "ok"),
    [
        ("a1", True),
        ("alice~mnist-worker-0-1", True),
        ("job.v2_3:retry@1", True),
        ("", False),
        (".hidden", False),
        ("..", False),
        ("a..b", False),
        ("a/b", False),
        ("a b", False),
        ("a" * 201, False),
    ],
)
def test_attempt_ids(attempt_id: str, ok: bool) -> None:
    assert is_attempt_id(attempt_id) is ok


def test_paths_refuse_ids_that_are_not_tokens(tmp_path: object) -> None:
    paths = AgentPaths(tmp_path)  # type: ignore[arg-type]
    with pytest.raises(InvalidAttemptIdError):
        paths.attempt("../etc")


def test_bound_fields_and_call_fields_land_on_the_line(caplog: pytest.LogCaptureFixture) -> None:
    log = bind(logging.getLogger("pai.nodeagent.test"), node="worker-1")
    with caplog.at_level(logging.INFO):
        log.bind(job="alice~j").info("attempt started", extra={"attempt": "a1", "note": "two words"})
    line = KeyValueFormatter().format(caplog.records[0])
    assert line.endswith(
        'INFO pai.nodeagent.test attempt started node=worker-1 job=alice~j attempt=a1 note="two words"'
    )
