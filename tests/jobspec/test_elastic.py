"""``extras.elastic`` (issue 31, the job protocol's part): how far each role may stretch, read from v1 and v2 alike
into the roles' ElasticRange, kept through the store, and every bad entry refused with the field and the rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pai.domain import InvalidProtocolError
from pai.domain.jobspec import ElasticRange
from pai.domain.limits import JobLimits
from pai.jobspec import ParsedJob, parse_job
from pai.jobspec.experiment import check_trial
from pai.store.codec import spec_from_dict, spec_to_dict
from tests.jobspec.builders import parse_v1, parse_v2, v1_job, v1_role, v2_job, v2_role

RULE = "(minInstances <= instances <= maxInstances)"


def v1(extras: dict[str, Any], worker: int = 4, ps: int = 1, limits: JobLimits | None = None) -> ParsedJob:
    job = v1_job(v1_role(taskNumber=worker), v1_role(name="ps", taskNumber=ps), extras=extras)
    if limits is None:
        return parse_v1(job)
    return parse_job(json.dumps(job), "application/json", limits=limits)


def v2(extras: dict[str, Any], worker: int = 4, ps: int = 1) -> ParsedJob:
    return parse_v2(v2_job({"worker": v2_role(instances=worker), "ps": v2_role(instances=ps)}, extras=extras))


def elastic(**roles: tuple[int, int]) -> dict[str, Any]:
    return {"elastic": {role: {"minInstances": low, "maxInstances": high} for role, (low, high) in roles.items()}}


VALID = [
    ("v1: worker stretches 2..8 from 4", lambda: v1(elastic(worker=(2, 8))),
     {"worker": ElasticRange(2, 8), "ps": None}, True),
    ("v2: worker stretches 2..8 from 4", lambda: v2(elastic(worker=(2, 8))),
     {"worker": ElasticRange(2, 8), "ps": None}, True),
    ("v2: both roles, asks for the minimum of one and the maximum of the other",
     lambda: v2(elastic(worker=(4, 6), ps=(1, 1))), {"worker": ElasticRange(4, 6), "ps": ElasticRange(1, 1)}, True),
    ("v1: min == max == instances: accepted, not elastic in effect", lambda: v1(elastic(worker=(4, 4))),
     {"worker": ElasticRange(4, 4), "ps": None}, False),
    ("v2: an empty elastic section", lambda: v2({"elastic": {}}), {"worker": None, "ps": None}, False),
    ("v2: gangAllocation true said out loud", lambda: v2({**elastic(worker=(1, 4)), "gangAllocation": True}),
     {"worker": ElasticRange(1, 4), "ps": None}, True),
    ("v1: at the cluster's limits", lambda: v1(elastic(worker=(2, 5)), limits=JobLimits(tasks_per_role=5,
                                                                                           tasks_per_job=6)),
     {"worker": ElasticRange(2, 5), "ps": None}, True),
    ("v2: integers written as 2.0", lambda: v2({"elastic": {"worker": {"minInstances": 2.0, "maxInstances": 8.0}}}),
     {"worker": ElasticRange(2, 8), "ps": None}, True),
]


@pytest.mark.parametrize(("name", "parse", "ranges", "resizes"), VALID, ids=[c[0] for c in VALID])
def test_valid(name: str, parse: Any, ranges: dict[str, ElasticRange | None], resizes: bool) -> None:
    parsed = parse()
    spec = parsed.spec
    assert {r.name: r.elastic for r in spec.task_roles} == ranges
    assert {r.name: r.instances for r in spec.task_roles} == {"worker": 4, "ps": 1}  # the size it asks for first
    assert spec.is_elastic is resizes
    assert spec.gang is True
    assert parsed.warnings == ()  # honoured: an elastic job grows and shrinks (pai.launcher.lifecycle's Resized)
    assert spec_from_dict(json.loads(json.dumps(spec_to_dict(spec)))) == spec


E = "extras.elastic"
INVALID = [
    ("v1: unknown role", lambda: v1(elastic(learner=(1, 2))), f"{E}.learner",
     f"{E}.learner: names no task role (roles: worker, ps)"),
    ("v2: unknown role", lambda: v2(elastic(learner=(1, 2))), f"{E}.learner",
     f"{E}.learner: names no task role (roles: worker, ps)"),
    ("v2: minInstances 0", lambda: v2(elastic(worker=(0, 8))), f"{E}.worker.minInstances",
     f"{E}.worker.minInstances: 0 is less than the minimum of 1"),
    ("v1: maxInstances negative", lambda: v1(elastic(worker=(2, -1))), f"{E}.worker.maxInstances",
     f"{E}.worker.maxInstances: -1 is less than the minimum of 1"),
    ("v2: minInstances a string", lambda: v2({"elastic": {"worker": {"minInstances": "2", "maxInstances": 8}}}),
     f"{E}.worker.minInstances", f"{E}.worker.minInstances: '2' is not of type integer"),
    ("v1: maxInstances a fraction", lambda: v1({"elastic": {"worker": {"minInstances": 2, "maxInstances": 7.5}}}),
     f"{E}.worker.maxInstances", f"{E}.worker.maxInstances: 7.5 is not of type integer"),
    ("v2: minInstances a boolean", lambda: v2({"elastic": {"worker": {"minInstances": True, "maxInstances": 8}}}),
     f"{E}.worker.minInstances", f"{E}.worker.minInstances: True is not of type integer"),
    ("v2: maxInstances missing", lambda: v2({"elastic": {"worker": {"minInstances": 2}}}),
     f"{E}.worker.maxInstances", f"{E}.worker.maxInstances: is required"),
    ("v1: an unknown key in an entry",
     lambda: v1({"elastic": {"worker": {"minInstances": 2, "maxInstances": 8, "step": 2}}}),
     f"{E}.worker.step", f"{E}.worker.step: additional property is not allowed"),
    ("v2: an entry that is not a mapping", lambda: v2({"elastic": {"worker": 4}}), f"{E}.worker",
     f"{E}.worker: 4 is not of type object"),
    ("v2: min > max", lambda: v2(elastic(worker=(8, 2))), f"{E}.worker",
     f"{E}.worker: minInstances 8 is greater than maxInstances 2"),
    ("v2: min > instances", lambda: v2(elastic(worker=(5, 8))), f"{E}.worker.minInstances",
     f"{E}.worker.minInstances: 5 is greater than taskRoles.worker.instances 4 {RULE}"),
    ("v1: min > taskNumber", lambda: v1(elastic(worker=(5, 8))), f"{E}.worker.minInstances",
     f"{E}.worker.minInstances: 5 is greater than taskRoles[0].taskNumber 4 {RULE}"),
    ("v2: instances > max", lambda: v2(elastic(worker=(2, 3))), f"{E}.worker.maxInstances",
     f"{E}.worker.maxInstances: 3 is less than taskRoles.worker.instances 4 {RULE}"),
    ("v1: taskNumber > max", lambda: v1(elastic(ps=(1, 1)), ps=2), f"{E}.ps.maxInstances",
     f"{E}.ps.maxInstances: 1 is less than taskRoles[1].taskNumber 2 {RULE}"),
    ("v1: max past the cluster's tasksPerRole", lambda: v1(elastic(worker=(2, 6)), limits=JobLimits(tasks_per_role=5)),
     f"{E}.worker.maxInstances", f"{E}.worker.maxInstances: 6 is greater than the maximum of 5"
     " (cluster limit tasksPerRole)"),
    ("v2: max past the schema's ceiling", lambda: v2(elastic(worker=(2, 10_001))), f"{E}.worker.maxInstances",
     f"{E}.worker.maxInstances: 10001 is greater than the maximum of 10000"),
    ("v1: the job at its maxima past tasksPerJob",
     lambda: v1(elastic(worker=(2, 5)), limits=JobLimits(tasks_per_role=5, tasks_per_job=5)), E,
     f"{E}: 6 tasks in all at the roles' maxInstances is greater than the maximum of 5 (cluster limit tasksPerJob)"),
    ("v1: elastic with gangAllocation false", lambda: v1({**elastic(worker=(2, 8)), "gangAllocation": False}), E,
     f"{E}: not allowed with extras.gangAllocation: false (an elastic job is admitted as a gang at its minimum)"),
    ("v2: elastic with gangAllocation false, even min == max",
     lambda: v2({**elastic(worker=(4, 4)), "gangAllocation": False}), E,
     f"{E}: not allowed with extras.gangAllocation: false (an elastic job is admitted as a gang at its minimum)"),
    ("v2: elastic not a mapping", lambda: v2({"elastic": ["worker"]}), E, f"{E}: ['worker'] is not of type object"),
]


@pytest.mark.parametrize(("name", "parse", "field", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid(name: str, parse: Any, field: str, message: str) -> None:
    with pytest.raises(InvalidProtocolError) as caught:
        parse()
    assert (caught.value.field, caught.value.message) == (field, message)
    assert caught.value.to_body() == {"code": "InvalidProtocolError", "message": message}


def test_a_trial_is_checked_as_a_job_with_its_errors_under_trial() -> None:
    trial = {"prerequisites": [{"name": "image", "type": "dockerimage", "uri": "busybox"}],
             "taskRoles": {"worker": v2_role(instances=2)}, "extras": elastic(worker=(3, 4))}
    with pytest.raises(InvalidProtocolError) as caught:
        check_trial(trial, "exp")
    assert caught.value.field == f"trial.{E}.worker.minInstances"
    assert caught.value.message == (f"trial.{E}.worker.minInstances: 3 is greater than taskRoles.worker.instances 2"
                                    f" {RULE}")
