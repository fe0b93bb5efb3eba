"""pai.jobspec.lines: the line where a document writes the field an error names (the editor's marker)."""

from __future__ import annotations

import json

import pytest

from pai.domain import InvalidProtocolError
from pai.jobspec import parse_job
from pai.jobspec.lines import MAX_LOCATED, line_of
from tests.jobspec.test_cases import CASES, INVALID

DOC = """protocolVersion: 2
name: x
taskRoles:
  worker:
    resourcePerInstance:
      gpu: -1
    commands:
      - "true"
      - 5
defaults: &d
  virtualCluster: nope
extras:
  com.microsoft.pai.runtimeplugin: []
"""


@pytest.mark.parametrize(("field", "line"), [
    ("taskRoles.worker.resourcePerInstance.gpu", 6),
    ("taskRoles.worker.commands[1]", 9),
    ("taskRoles.worker.commands[7]", 7),  # no such item: its list's line
    ("taskRoles.worker.dockerImage", 4),  # missing: its role's line
    ("extras.com.microsoft.pai.runtimeplugin", 13),  # a key with dots in it
    ("virtualCluster", 11),  # not at the top: the key of that name nearest the top
    ("", None),
    ("nothing", None),
])
def test_the_line_of_a_field(field: str, line: int | None) -> None:
    assert line_of(DOC, field) == line


def test_a_message_that_says_its_line_is_taken_and_json_is_read_as_yaml() -> None:
    assert line_of("a: [", "", "malformed YAML: expected ',' or ']' at line 3 column 1") == 3
    assert line_of(DOC, "name", "name: duplicate key 'name' (line 7)") == 7
    assert line_of(DOC, "name", "name: 'line 9' does not match") == 2  # a value's words are no line
    text = json.dumps({"jobName": "x", "taskRoles": [{"name": "a", "gpuNumber": "two"}]}, indent=2)
    assert line_of(text, "taskRoles[0].gpuNumber") == 6
    assert line_of("{not: yaml: at all", "x") is None
    padded = DOC + "#" * MAX_LOCATED  # too long to compose again: no line, unless the message has it
    assert line_of(padded, "taskRoles.worker.resourcePerInstance.gpu") is None
    assert line_of(padded, "", "malformed YAML: ... at line 3 column 1") == 3


@pytest.mark.parametrize("rel", INVALID)
def test_every_invalid_case_gets_a_line_within_its_document_or_none(rel: str) -> None:
    body = (CASES / rel).read_bytes()
    with pytest.raises(InvalidProtocolError) as caught:
        parse_job(body, "application/json" if rel.endswith(".json") else "application/yaml")
    text = body.decode("utf-8-sig", errors="replace")
    line = line_of(text, caught.value.field or "", caught.value.message)
    assert line is None or 1 <= line <= text.count("\n") + 1
