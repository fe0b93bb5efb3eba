"""Every spec under job_schemas/cases goes through parse_job; invalid ones fail with the expected field and rule.

The expectations live next to the cases, in job_schemas/cases/expected.json: for an invalid case
``{"field": <path>, "contains": <text of the message>}``, for a valid one ``{"protocol": 1|2, "roles": {name: n}}``.
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import pytest

from pai.domain import InvalidProtocolError
from pai.jobspec import parse_job

CASES = resources.files("job_schemas") / "cases"
EXPECTED: dict[str, dict[str, Any]] = json.loads((CASES / "expected.json").read_text(encoding="utf-8"))
CONTENT_TYPES = {".json": "application/json", ".yaml": "application/yaml"}


def _case_files(kind: str) -> list[str]:
    found = []
    for version in ("v1", "v2"):
        folder: Traversable = CASES / version / kind
        found += [f"{version}/{kind}/{f.name}" for f in folder.iterdir() if f.is_file()]
    return sorted(found)


VALID = _case_files("valid")
INVALID = _case_files("invalid")


def _parse(rel: str) -> Any:
    body = (CASES / rel).read_bytes()
    suffix = rel[rel.rindex(".") :]
    return parse_job(body, CONTENT_TYPES[suffix])


def test_every_case_has_an_expectation_and_every_expectation_a_case() -> None:
    assert sorted(EXPECTED) == sorted(VALID + INVALID)


def test_the_required_kinds_of_invalid_case_are_covered() -> None:
    required = [
        "no-task-roles",
        "bad-job-name",
        "negative-gpu",
        "unknown-field",
        "wrong-type",
        "malformed",
        "missing-command",
        "number-zero",
        "duplicate-roles",
        "docker-image-names-nothing",
    ]
    for word in required:
        assert any(word in name for name in INVALID), word
    assert len(INVALID) >= 60


@pytest.mark.parametrize("rel", VALID)
def test_valid_case_parses(rel: str) -> None:
    parsed = _parse(rel)
    expected = EXPECTED[rel]
    assert parsed.protocol_version == expected["protocol"]
    assert parsed.spec.protocol_version == expected["protocol"]
    assert {r.name: r.instances for r in parsed.spec.task_roles} == expected["roles"]


@pytest.mark.parametrize("rel", INVALID)
def test_invalid_case_is_rejected_with_field_and_rule(rel: str) -> None:
    expected = EXPECTED[rel]
    with pytest.raises(InvalidProtocolError) as caught:
        _parse(rel)
    error = caught.value
    assert error.field == expected["field"]
    assert expected["contains"] in error.message
    assert error.message.startswith(f"{expected['field'] or '<root>'}: ") or not expected["field"]
    assert error.to_body() == {"code": "InvalidProtocolError", "message": error.message}
