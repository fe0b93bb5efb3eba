"""``pai logs -f``'s pieces: what --since sends, and the line that says how the task ended."""

from __future__ import annotations

import click
import pytest

from pai.cli.follow import how_it_ended, since_value


@pytest.mark.parametrize(("given", "sent"), [
    ("90", "90"), ("30s", "30"), ("10m", "600"), ("2h", "7200"), ("1d", "86400"), ("1.5h", "5400"),
    ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z"), (None, None),
])
def test_since_is_seconds_before_now_or_an_iso_time(given: str | None, sent: str | None) -> None:
    assert since_value(given) == sent


def test_since_that_is_neither_is_a_usage_error() -> None:
    with pytest.raises(click.BadParameter, match="neither a duration"):
        since_value("yesterday")


def test_how_the_task_ended() -> None:
    detail = {"jobStatus": {"state": "FAILED"}, "taskRoles": {"w": {"taskStatuses": [
        {"taskIndex": 0, "taskState": "SUCCEEDED", "containerExitCode": 0},
        {"taskIndex": 1, "taskState": "FAILED", "containerExitCode": 3}]}}}
    assert how_it_ended(detail, "alice~j", "w", 1) == "task w[1] of job alice~j ended: FAILED (exit code 3); job FAILED"
