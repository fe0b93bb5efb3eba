"""Body decoding: JSON or YAML, what counts as malformed, and YAML's traps (duplicates, aliases, dates)."""

from __future__ import annotations

import json

import pytest
import yaml

from pai.domain import InvalidProtocolError
from pai.jobspec import parse_job
from pai.jobspec.decode import MAX_NODES, Syntax, decode

from .builders import v1_job, v2_job

V1_JSON = json.dumps(v1_job())
V2_YAML = yaml.safe_dump(v2_job(), sort_keys=False)


@pytest.mark.parametrize(
    ("body", "content_type", "syntax"),
    [
        pytest.param(V1_JSON, "application/json", Syntax.JSON, id="json content type"),
        pytest.param(V1_JSON, "Application/JSON; charset=utf-8", Syntax.JSON, id="content type with parameters"),
        pytest.param(V1_JSON, None, Syntax.JSON, id="json object without content type"),
        pytest.param("\n  " + V1_JSON, "text/plain", Syntax.JSON, id="json object, leading blanks"),
        pytest.param(V2_YAML, "application/yaml", Syntax.YAML, id="yaml content type"),
        pytest.param(V2_YAML, None, Syntax.YAML, id="yaml without content type"),
        pytest.param("{protocolVersion: 2}", None, Syntax.YAML, id="yaml flow mapping"),
        pytest.param('{"broken": ', None, Syntax.JSON, id="broken json object"),
    ],
)
def test_syntax_detection(body: str, content_type: str | None, syntax: Syntax) -> None:
    assert Syntax.of(body, content_type) is syntax


@pytest.mark.parametrize(
    ("body", "content_type", "version"),
    [
        pytest.param(V1_JSON, "application/json", 1, id="v1 json"),
        pytest.param(yaml.safe_dump(v1_job()), "text/yaml", 1, id="v1 written as yaml"),
        pytest.param(V2_YAML, None, 2, id="v2 yaml"),
        pytest.param(json.dumps(v2_job()), "application/json", 2, id="v2 json"),
        pytest.param(V1_JSON.encode("utf-8-sig"), None, 1, id="bytes with BOM"),
    ],
)
def test_protocol_detection(body: str | bytes, content_type: str | None, version: int) -> None:
    assert parse_job(body, content_type).protocol_version == version


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        pytest.param("jobName: x", "application/json", "malformed JSON", id="yaml sent as json"),
        pytest.param(b"\xff\xfe\x00", None, "not UTF-8", id="not utf-8"),
        pytest.param("name: [", None, "malformed YAML", id="unclosed flow"),
        pytest.param('"just text"', "application/json", "must be a mapping, got str", id="json string"),
        pytest.param("42", None, "must be a mapping, got int", id="yaml scalar"),
        pytest.param("", None, "must be a mapping, got empty", id="empty body"),
        pytest.param("a: 1\n---\nb: 2\n", None, "malformed YAML", id="two documents"),
        pytest.param("? [a, b]\n: 1\n", None, "keys must be scalars", id="sequence key"),
        pytest.param("a: &x [*x]\n", None, "recursive YAML alias", id="recursive alias"),
    ],
)
def test_undecodable_bodies(body: str | bytes, content_type: str | None, message: str) -> None:
    with pytest.raises(InvalidProtocolError) as caught:
        parse_job(body, content_type)
    assert message in caught.value.message
    assert caught.value.field is not None


def test_alias_bomb_is_rejected_before_validation() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    with pytest.raises(InvalidProtocolError, match=f"expands past {MAX_NODES} nodes"):
        parse_job("\n".join(lines))


def test_aliases_and_merge_keys_work() -> None:
    body = """
protocolVersion: 2
name: anchors
type: job
prerequisites: [{name: image, type: dockerimage, uri: busybox}]
taskRoles:
  a: &role
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: [echo a]
  b:
    <<: *role
    instances: 3
    commands: [echo b]
"""
    spec = parse_job(body).spec
    assert [(r.name, r.instances, r.command) for r in spec.task_roles] == [("a", 1, "echo a"), ("b", 3, "echo b")]


def test_duplicate_keys_are_reported_with_their_path() -> None:
    with pytest.raises(InvalidProtocolError) as caught:
        decode("a:\n  b: 1\n  c: [ {d: 1, d: 2} ]\n")
    assert caught.value.field == "a.c[0].d"


def test_yaml_dates_stay_text_so_the_config_is_json() -> None:
    parsed = parse_job(yaml.safe_dump(v2_job(parameters={"x": 1})).replace("x: 1", "since: 2024-01-31"))
    assert parsed.config["parameters"] == {"since": "2024-01-31"}
    json.dumps(parsed.config)


def test_text_is_the_body_as_submitted() -> None:
    assert parse_job(V2_YAML.encode()).text == V2_YAML
