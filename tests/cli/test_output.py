"""Pure formatting: tables, times, sizes."""

from __future__ import annotations

import pytest

from pai.cli.output import format_ago, format_memory, format_number, format_time, render_table, used_total

NOW = 1_700_000_000_000


def test_table_aligns_columns_and_shows_missing_values_as_dash() -> None:
    text = render_table(("NAME", "STATE", "EXIT"), [("a", "RUNNING", None), ("longer-name", "", 1)])
    assert text.splitlines() == [
        "NAME         STATE    EXIT",
        "a            RUNNING  -",
        "longer-name  -        1",
    ]


def test_empty_table_is_just_the_header() -> None:
    assert render_table(("A", "B"), []) == "A  B"


@pytest.mark.parametrize(
    ("ago_ms", "expected"),
    [
        pytest.param(0, "0s ago", id="now"),
        pytest.param(59_999, "59s ago", id="seconds"),
        pytest.param(60_000, "1m ago", id="one-minute"),
        pytest.param(3 * 3_600_000 + 5, "3h ago", id="hours"),
        pytest.param(2 * 86_400_000, "2d ago", id="days"),
        pytest.param(-5_000, "0s ago", id="clock-skew-future"),
    ],
)
def test_format_ago(ago_ms: int, expected: str) -> None:
    assert format_ago(NOW - ago_ms, NOW) == expected


def test_format_ago_of_no_heartbeat_is_dash() -> None:
    assert format_ago(None, NOW) == "-"


@pytest.mark.parametrize(
    ("mb", "expected"),
    [(None, "-"), (0, "0M"), (512, "512M"), (1024, "1G"), (15872, "15.5G"), (16384, "16G")],
)
def test_format_memory(mb: float | None, expected: str) -> None:
    assert format_memory(mb) == expected


@pytest.mark.parametrize(("value", "expected"), [(4.0, "4"), (0.5, "0.5"), (1.25, "1.25"), (None, "-")])
def test_format_number(value: float | None, expected: str) -> None:
    assert format_number(value) == expected


def test_used_total_with_missing_side() -> None:
    assert used_total(2, 4) == "2/4"
    assert used_total(None, 8.0) == "-/8"


def test_format_time_is_local_time() -> None:
    # the autouse fixture sets TZ=UTC
    assert format_time(NOW) == "2023-11-14 22:13:20"
    assert format_time(None) == "-"
