"""Bounds on job specs: every field has a ceiling, the cluster's job-size limits apply, and no body (however deep,
long or strange) gets past decoding as anything but an InvalidProtocolError naming the field and the rule."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from pai.domain import InvalidParametersError, InvalidProtocolError
from pai.domain.limits import JobLimits
from pai.jobspec import bounds, parse_job, stored_config
from pai.jobspec.bounds import MAX_DEPTH, MAX_NODES
from pai.jobspec.vcconfig import validate_cluster_config
from pai.vc.config import parse_config

from .builders import parse_v1, parse_v2, v1_job, v1_role, v2_job, v2_role


def _nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _v2_roles(count: int) -> dict[str, dict[str, Any]]:
    return {f"r{i}": v2_role() for i in range(count)}


@pytest.mark.parametrize(
    ("build", "field", "rule"),
    [
        pytest.param(lambda: parse_v1(v1_job(v1_role(name="r" * 65))), "taskRoles[0].name",
                     "is longer than 64 characters", id="v1 role name"),
        pytest.param(lambda: parse_v1(v1_job(v1_role(command="x" * 65_537))), "taskRoles[0].command",
                     "is longer than 65536 characters", id="v1 command"),
        pytest.param(lambda: parse_v1(v1_job(image="i" * 1025)), "image", "is longer than 1024", id="v1 image"),
        pytest.param(lambda: parse_v1(v1_job(codeDir="/" + "c" * 4096)), "codeDir", "is longer than 4096",
                     id="v1 codeDir"),
        pytest.param(lambda: parse_v1(v1_job(jobEnvs={"E": "v" * 32_769})), "jobEnvs.E",
                     "is longer than 32768", id="v1 env value"),
        pytest.param(lambda: parse_v1(v1_job(jobEnvs={f"E{i}": "v" for i in range(257)})), "jobEnvs",
                     "has too many properties", id="v1 env count"),
        pytest.param(lambda: parse_v1(v1_job(*[v1_role(name=f"r{i}") for i in range(101)])), "taskRoles",
                     "is too long", id="v1 role count"),
        pytest.param(lambda: parse_v1(v1_job(v1_role(portList=[{"label": f"p{i}", "beginAt": 0, "portNumber": 1}
                                                              for i in range(33)]))),
                     "taskRoles[0].portList", "is too long", id="v1 port entries"),
        pytest.param(lambda: parse_v1(v1_job(v1_role(cpuNumber=4097))), "taskRoles[0].cpuNumber",
                     "4097 is greater than the maximum of 4096", id="v1 cpu"),
        pytest.param(lambda: parse_v1(v1_job(v1_role(shmMB=16_777_217, memoryMB=16_777_216))),
                     "taskRoles[0].shmMB", "greater than the maximum of 16777216", id="v1 shm"),
        pytest.param(lambda: parse_v1(v1_job(v1_role(minSucceededTaskCount=10_001))),
                     "taskRoles[0].minSucceededTaskCount", "greater than the maximum of 10000", id="v1 completion"),
        pytest.param(lambda: parse_v1(v1_job(killAllOnCompletedTaskNumber=2**31)), "killAllOnCompletedTaskNumber",
                     "greater than the maximum of 2147483647", id="v1 deprecated integer"),
        pytest.param(lambda: parse_v2(v2_job(_v2_roles(101))), "taskRoles", "has too many properties",
                     id="v2 role count"),
        pytest.param(lambda: parse_v2(v2_job({"r" * 65: v2_role()})), "taskRoles." + "r" * 65,
                     "is longer than 64", id="v2 role name"),
        pytest.param(lambda: parse_v2(v2_job({"w": v2_role(commands=["x"] * 1001)})), "taskRoles.w.commands",
                     "is too long", id="v2 command count"),
        pytest.param(lambda: parse_v2(v2_job(description="d" * 65_537)), "description", "is longer than 65536",
                     id="v2 description"),
        pytest.param(lambda: parse_v1(v1_job(extras={"expectedDurationSeconds": 31_536_001})),
                     "extras.expectedDurationSeconds", "greater than the maximum of 31536000",
                     id="v1 expected duration"),
        pytest.param(lambda: parse_v2(v2_job(extras={"expectedDurationSeconds": 0})),
                     "extras.expectedDurationSeconds", "less than or equal to the minimum of 0",
                     id="v2 expected duration"),
        pytest.param(lambda: parse_v2(v2_job(jobRetryCount=1001)), "jobRetryCount",
                     "1001 is greater than the maximum of 1000", id="v2 job retries"),
        pytest.param(lambda: parse_v2(v2_job(parameters={f"p{i}": i for i in range(1001)})), "parameters",
                     "has too many properties", id="v2 parameter count"),
        pytest.param(lambda: parse_v2(v2_job({"w": v2_role(commands=["a" * 40_000, "b" * 30_000])})),
                     "taskRoles.w.commands[1]", "longer than 65536 characters once templates are rendered",
                     id="v2 commands together"),
        pytest.param(lambda: parse_v2(v2_job(_v2_roles(6) | {f"r{i}": v2_role(instances=1000) for i in range(6)})),
                     "taskRoles", "6000 tasks in all is greater than the maximum of 5000 (cluster limit tasksPerJob)",
                     id="v2 tasks per job"),
    ],
)
def test_every_field_has_a_ceiling(build: Callable[[], Any], field: str, rule: str) -> None:
    with pytest.raises(InvalidProtocolError) as caught:
        build()
    assert caught.value.field == field
    assert caught.value.message.startswith(f"{field}: ")
    assert rule in caught.value.message


def test_a_job_at_every_cluster_limit_is_accepted() -> None:
    job = v1_job(*[v1_role(name=f"r{i}", taskNumber=1000) for i in range(5)])
    assert sum(r.instances for r in parse_v1(job).spec.task_roles) == 5000


@pytest.mark.parametrize(
    ("limits", "instances", "message"),
    [
        pytest.param(JobLimits(tasks_per_role=2), [3], "taskRoles[0].taskNumber: 3 is greater than the maximum of 2"
                     " (cluster limit tasksPerRole)", id="per role"),
        pytest.param(JobLimits(tasks_per_role=2, tasks_per_job=3), [2, 2], "taskRoles: 4 tasks in all is greater than"
                     " the maximum of 3 (cluster limit tasksPerJob)", id="per job"),
        pytest.param(JobLimits(tasks_per_role=2, tasks_per_job=4), [2, 2], None, id="at both limits"),
    ],
)
def test_the_cluster_limits_are_the_ones_passed_in(
    limits: JobLimits, instances: list[int], message: str | None
) -> None:
    body = json.dumps(v1_job(*[v1_role(name=f"r{i}", taskNumber=n) for i, n in enumerate(instances)]))
    if message is None:
        assert len(parse_job(body, "application/json", limits=limits).spec.task_roles) == len(instances)
        return
    with pytest.raises(InvalidProtocolError) as caught:
        parse_job(body, "application/json", limits=limits)
    assert caught.value.message == message


def test_cluster_limits_come_from_the_configuration() -> None:
    doc = validate_cluster_config({"limits": {"tasksPerRole": 8, "tasksPerJob": 20}})
    assert parse_config(doc).limits == JobLimits(tasks_per_role=8, tasks_per_job=20)
    assert parse_config({}).limits == JobLimits(tasks_per_role=1000, tasks_per_job=5000)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        pytest.param({"limits": {"tasksPerRole": 10_001}}, "limits.tasksPerRole", id="tasks per role ceiling"),
        pytest.param({"limits": {"tasksPerJob": 0}}, "limits.tasksPerJob", id="tasks per job floor"),
        pytest.param({"priorityClasses": {"big": 2**31}}, "priorityClasses.big", id="priority fits its column"),
        pytest.param({"virtualClusters": [{"name": "a", "max": {"gpu": "1" * 16}}]},
                     "virtualClusters[0].max.gpu", id="amount digits"),
    ],
)
def test_cluster_configuration_is_bounded(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidParametersError) as caught:
        validate_cluster_config(doc)
    assert caught.value.field == field


DEEP_BLOCK_YAML = "a:\n" + "".join("  " * i + "- \n" for i in range(1, MAX_DEPTH + 2))


@pytest.mark.parametrize(
    ("body", "content_type", "rule"),
    [
        pytest.param("[" * 100_000, "application/json", "nested deeper than 64 levels", id="brackets as json"),
        pytest.param("[" * 100_000, "text/yaml", "nested deeper than 64 levels", id="brackets as yaml"),
        pytest.param("{" * 100_000, None, "nested deeper than 64 levels", id="braces, no content type"),
        pytest.param("{", "text/yaml", "malformed", id="lone brace as yaml"),
        pytest.param(b"\x00\x00\x00", "text/yaml", "malformed YAML: special characters are not allowed",
                     id="NUL bytes as yaml"),
        pytest.param(b"{\x00}", None, "malformed", id="NUL in braces"),
        pytest.param(DEEP_BLOCK_YAML, "text/yaml", "nested deeper than 64 levels", id="deep block yaml"),
        pytest.param("a: [" + "x, " * MAX_NODES + "x]", "text/yaml", f"more than {MAX_NODES} nodes",
                     id="too many yaml nodes"),
        pytest.param('{"a": ' + "9" * 4301 + "}", "application/json", "malformed JSON: Exceeds the limit",
                     id="json integer digits"),
        pytest.param('{"a": Infinity}', "application/json", "Infinity is not a JSON number", id="json infinity"),
        pytest.param('{"a": 1e400}', "application/json", "a: inf is not a finite number", id="json overflowing float"),
        pytest.param("a: !!int abc", "text/yaml", "malformed YAML: invalid literal", id="yaml int tag"),
        pytest.param("a: !!binary a", "text/yaml", "malformed YAML: failed to decode base64", id="yaml binary tag"),
        pytest.param("a: !!python/object:os.system {}", "text/yaml", "malformed YAML", id="yaml python tag"),
        pytest.param("a: !!binary aGk=", "text/yaml", "a: a YAML bytes is not allowed", id="yaml bytes"),
        pytest.param("a: !!omap [{b: 1}]", "text/yaml", "a[0]: a YAML tuple is not allowed", id="yaml omap"),
        pytest.param("a: {null: 1}", "text/yaml", "a: key None is not a string", id="yaml null key"),
        pytest.param('{"a": "\\u0000"}', "application/json", "a: NUL characters", id="json escaped NUL"),
        pytest.param('{"\\u0000": 1}', "application/json", ": NUL characters", id="NUL in a key"),
    ],
)
@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "pure-python"])
def test_no_body_gets_past_decoding_unrefused(body: str | bytes, content_type: str | None, rule: str, libyaml: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if not libyaml:
        monkeypatch.setattr(bounds, "_FAST_LOADER", None)
    with pytest.raises(InvalidProtocolError) as caught:
        parse_job(body, content_type)
    assert rule in caught.value.message
    assert caught.value.field is not None


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        pytest.param(json.dumps(v1_job(extras={"x": _nested(MAX_DEPTH - 2)})), "application/json", id="json"),
        pytest.param(yaml.safe_dump(v2_job(parameters={"x": _nested(MAX_DEPTH - 2)})), "text/yaml", id="yaml"),
    ],
)
def test_nesting_up_to_the_limit_is_accepted(body: str, content_type: str) -> None:
    parse_job(body, content_type)


def test_a_syntax_error_libyaml_does_not_share_still_gets_the_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refusing(yaml.SafeLoader):
        """A fast loader that fails at once, as LibYAML does on input PyYAML accepts."""

        def check_event(self, *choices: Any) -> bool:
            raise yaml.YAMLError("disagrees")

    monkeypatch.setattr(bounds, "_FAST_LOADER", Refusing)
    with pytest.raises(InvalidProtocolError, match="nested deeper than 64 levels"):
        parse_job(DEEP_BLOCK_YAML, "text/yaml")


@pytest.mark.parametrize(
    ("text", "version"),
    [
        pytest.param(json.dumps(v1_job(extras={"x": _nested(70)}, jobEnvs={"N": float("nan")})), 1,
                     id="v1: deep and NaN"),
        pytest.param(yaml.safe_dump(v2_job(parameters={"x": _nested(70), "y": "a\x00b"})), 2, id="v2: deep and NUL"),
    ],
)
def test_a_spec_accepted_before_the_bounds_stays_readable(text: str, version: int) -> None:
    with pytest.raises(InvalidProtocolError):
        parse_job(text)
    config, read_version = stored_config(text)
    assert read_version == version and config
