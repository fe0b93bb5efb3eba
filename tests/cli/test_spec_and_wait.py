"""Pure parts of submit: which body and Content-Type a spec file becomes, and the wait loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pai.cli.errors import SpecFileError, WaitTimeoutError
from pai.cli.submit import JSON_TYPE, YAML_TYPE, prepare_spec, wait_for_job

from .builders import job_detail

V1_JSON = '{"jobName": "mnist", "image": "busybox", "taskRoles": [{"name": "w", "taskNumber": 1}]}'
V2_YAML = "protocolVersion: 2\nname: mnist\ntype: job\n# a comment the master keeps\ntaskRoles: {}\n"
V1_YAML = "jobName: mnist\nimage: busybox\ntaskRoles:\n  - name: w\n    taskNumber: 1\n"
V2_JSON = '{"protocolVersion": 2, "name": "mnist", "type": "job", "taskRoles": {}}'


@pytest.mark.parametrize(
    ("text", "source", "content_type", "version", "body"),
    [
        pytest.param(V1_JSON, "job.json", JSON_TYPE, 1, V1_JSON, id="v1-json-by-extension"),
        pytest.param(V2_YAML, "job.yaml", YAML_TYPE, 2, V2_YAML, id="v2-yaml-sent-verbatim"),
        pytest.param(V2_YAML, "job.yml", YAML_TYPE, 2, V2_YAML, id="yml-extension"),
        pytest.param("  " + V1_JSON, "<stdin>", JSON_TYPE, 1, "  " + V1_JSON, id="stdin-json-by-content"),
        pytest.param(V2_YAML, "<stdin>", YAML_TYPE, 2, V2_YAML, id="stdin-yaml-by-content"),
        pytest.param(V2_JSON, "job.json", YAML_TYPE, 2, V2_JSON, id="v2-written-as-json-goes-as-yaml"),
    ],
)
def test_prepare_spec(text: str, source: str, content_type: str, version: int, body: str) -> None:
    spec = prepare_spec(text, source)
    assert (spec.content_type, spec.protocol_version, spec.body.decode()) == (content_type, version, body)


def test_v1_job_written_as_yaml_is_sent_as_json() -> None:
    spec = prepare_spec(V1_YAML, "job.yaml")
    assert spec.content_type == JSON_TYPE
    assert json.loads(spec.body) == {
        "jobName": "mnist", "image": "busybox", "taskRoles": [{"name": "w", "taskNumber": 1}],
    }


@pytest.mark.parametrize(
    ("text", "source", "fragment"),
    [
        pytest.param('{"jobName": ', "job.json", "invalid JSON", id="broken-json"),
        pytest.param("name: [unclosed", "job.yaml", "invalid YAML", id="broken-yaml"),
        pytest.param("- a\n- b\n", "job.yaml", "expected a mapping", id="list-at-top"),
        pytest.param("", "job.yaml", "expected a mapping", id="empty"),
    ],
)
def test_prepare_spec_rejects(text: str, source: str, fragment: str) -> None:
    with pytest.raises(SpecFileError) as info:
        prepare_spec(text, source)
    assert info.value.source == source
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("text", "source", "expected"),
    [
        pytest.param(
            "name: job\ntaskRoles:\n  w: [unclosed\n", "job.yaml",
            "invalid YAML at line 4, column 1: expected ',' or ']', but got '<stream end>'\n"
            "  (while parsing a flow sequence at line 3, column 6)",
            id="yaml-problem-and-context",
        ),
        pytest.param(
            "name: job\n  bad: indent\n", "job.yaml",
            "invalid YAML at line 2, column 6: mapping values are not allowed here\n"
            "  2 |   bad: indent\n"
            "    |      ^",
            id="yaml-caret-under-the-column",
        ),
        pytest.param(
            '{\n  "jobName": "j",\n  "taskRoles": [,]\n}', "job.json",
            "invalid JSON at line 3, column 17: Expecting value\n"
            '  3 |   "taskRoles": [,]\n'
            "    |                 ^",
            id="json",
        ),
    ],
)
def test_parse_errors_name_line_and_column_on_lines_of_their_own(text: str, source: str, expected: str) -> None:
    with pytest.raises(SpecFileError) as info:
        prepare_spec(text, source)
    assert expected in info.value.detail, info.value.detail


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def polls(*states: str) -> Any:
    details = [job_detail(state=s) for s in states]
    return lambda: details.pop(0) if len(details) > 1 else details[0]


def test_wait_reports_each_state_once_and_returns_the_terminal_detail() -> None:
    fake, seen = FakeTime(), []
    final = wait_for_job(
        polls("WAITING", "WAITING", "RUNNING", "RUNNING", "SUCCEEDED"),
        key="admin~mnist", timeout=None, interval=2.0,
        on_change=lambda d: seen.append(d["jobStatus"]["state"]), clock=fake.clock, sleep=fake.sleep,
    )
    assert final["jobStatus"]["state"] == "SUCCEEDED"
    assert seen == ["WAITING", "RUNNING", "SUCCEEDED"]
    assert fake.sleeps == [2.0] * 4


def test_wait_gives_up_at_the_timeout_with_the_last_state() -> None:
    fake = FakeTime()
    with pytest.raises(WaitTimeoutError) as info:
        wait_for_job(polls("RUNNING"), key="admin~mnist", timeout=5.0, interval=2.0,
                     on_change=lambda d: None, clock=fake.clock, sleep=fake.sleep)
    assert (info.value.job, info.value.state, info.value.timeout) == ("admin~mnist", "RUNNING", 5.0)
    assert fake.now <= 5.0
    assert info.value.render() == "job admin~mnist is still RUNNING after 5s"


@pytest.mark.parametrize("terminal", ["SUCCEEDED", "FAILED", "STOPPED"])
def test_wait_stops_at_every_terminal_state(terminal: str) -> None:
    fake = FakeTime()
    final = wait_for_job(polls("RUNNING", "STOPPING", terminal), key="k", timeout=None, interval=1.0,
                         on_change=lambda d: None, clock=fake.clock, sleep=fake.sleep)
    assert final["jobStatus"]["state"] == terminal
    assert len(fake.sleeps) == 2


def test_relative_code_dir_is_resolved_next_to_the_spec_file(tmp_path: Path) -> None:
    spec = tmp_path / "jobs" / "job.json"
    spec.parent.mkdir()
    text = json.dumps({"jobName": "j", "codeDir": "src", "taskRoles": []})
    prepared = prepare_spec(text, str(spec))
    assert json.loads(prepared.body)["codeDir"] == str(tmp_path / "jobs" / "src")
    for kept in ("/abs/dir", "hdfs://nn:9000/code", "file:///x", "../outside", "src/../../etc"):
        body = prepare_spec(json.dumps({"jobName": "j", "codeDir": kept}), str(spec)).body
        assert json.loads(body)["codeDir"] == kept
