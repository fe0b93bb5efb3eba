"""``since`` of a followed log: seconds before now, or an ISO 8601 time (UTC when it names no zone)."""

from __future__ import annotations

import pytest

from pai.domain.errors import InvalidParametersError
from pai.rest_server.logfollow import parse_since

NOW = 1_800_000_000.0


@pytest.mark.parametrize(("raw", "at"), [
    (None, None), ("", None), ("90", NOW - 90), ("1.5", NOW - 1.5),
    ("2027-01-15T08:00:00Z", NOW), ("2027-01-15T08:00:00", NOW),
    ("2027-01-15T09:00:00+01:00", NOW),
])
def test_since(raw: str | None, at: float | None) -> None:
    assert parse_since(raw, NOW) == at


@pytest.mark.parametrize("raw", ["yesterday", "-5", "1e3", "2027-13-01"])
def test_a_since_that_is_neither_is_refused_naming_it(raw: str) -> None:
    with pytest.raises(InvalidParametersError) as refused:
        parse_since(raw, NOW)
    assert refused.value.field == "since"
