"""A v1 job posted as a form (qs bracket notation, every value a string) becomes the JSON job it stands for."""

from __future__ import annotations

from typing import Any

import pytest

from pai.domain.errors import InvalidProtocolError
from pai.jobspec.form import nest, v1_job_from_form

ROLE = [("taskRoles[0][name]", "worker"), ("taskRoles[0][taskNumber]", "2"), ("taskRoles[0][cpuNumber]", "1"),
        ("taskRoles[0][memoryMB]", "256"), ("taskRoles[0][gpuNumber]", "0"), ("taskRoles[0][command]", "123")]


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        pytest.param([("jobName", "j"), ("image", "busybox"), *ROLE],
                     {"jobName": "j", "image": "busybox", "taskRoles": [
                         {"name": "worker", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
                          "command": "123"}]},
                     id="numbers where the schema wants them; a command of digits stays text"),
        pytest.param([("jobName", "j"), ("retryCount", "-1"), ("killAllOnCompletedTaskNumber", "1")],
                     {"jobName": "j", "retryCount": -1, "killAllOnCompletedTaskNumber": 1}, id="negative integer"),
        pytest.param([("taskRoles[0][portList][0][label]", "http"), ("taskRoles[0][portList][0][portNumber]", "1"),
                      ("taskRoles[0][portList][1][label]", "ssh"), ("taskRoles[0][portList][1][portNumber]", "2")],
                     {"taskRoles": [{"portList": [{"label": "http", "portNumber": 1},
                                                  {"label": "ssh", "portNumber": 2}]}]}, id="nested arrays"),
        pytest.param([("jobEnvs[DEBUG]", "1"), ("jobEnvs[NAME]", "x")], {"jobEnvs": {"DEBUG": "1", "NAME": "x"}},
                     id="a map keeps its values as the schema has them"),
        pytest.param([("taskRoles[0][minSucceededTaskCount]", "")], {"taskRoles": [{"minSucceededTaskCount": None}]},
                     id="empty where null is allowed"),
        pytest.param([("taskRoles[0][taskNumber]", "two")], {"taskRoles": [{"taskNumber": "two"}]},
                     id="not a number: left for the schema to refuse"),
    ],
)
def test_form_to_job(pairs: list[tuple[str, str]], expected: dict[str, Any]) -> None:
    assert v1_job_from_form(pairs) == expected


@pytest.mark.parametrize(
    ("pairs", "mentions"),
    [
        pytest.param([("a]b", "x")], "a]b", id="not a field name"),
        pytest.param([("taskRoles[5000][name]", "x")], "5000", id="index too large"),
        pytest.param([("jobName", "x"), ("jobName[a]", "y")], "jobName", id="a value and a structure"),
    ],
)
def test_bad_forms_name_the_field(pairs: list[tuple[str, str]], mentions: str) -> None:
    with pytest.raises(InvalidProtocolError, match=mentions.replace("[", r"\[").replace("]", r"\]")):
        nest(pairs)
