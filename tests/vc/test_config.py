"""The VC configuration file: schema (job_schemas/vc-config.json) and its translation to VcQuota objects."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from pai.domain.errors import InvalidParametersError
from pai.domain.resources import Resources
from pai.vc.config import ClusterConfig, parse_config
from pai.vc.policy import Reclaim, SchedulerConfig, WhileBorrowing, WithinVc

TOTAL = Resources(16, 64, 512_000)
BIG = 10**15

EXAMPLE = """
virtualClusters:
  - name: research
    guaranteed: {gpu: "50%", cpu: "50%", memoryMB: "50%"}
    max: {gpu: "75%"}
    lendingLimit: {gpu: 2}
    preemption:
      reclaim: LowerPriority
      withinVc: LowerOrNewerEqualPriority
      whileBorrowing: {enabled: true, priorityThreshold: -1}
    strictFifo: true
    userLimits: {gpu: 4, users: {alice: 8}}
  - name: prod
    guaranteed: {gpu: 4, cpu: 16, memoryMB: 128000}
  - name: default
priorityClasses:
  urgent: 1000
scheduler:
  maxPreemptionFraction: 0.25
  minRunSeconds: 300
  reservationAfterSeconds: 600
  maxReservations: 2
  wholeNodesForMultiNodeGpu: true
"""


def schema_errors(doc: Any) -> list[str]:
    schema = json.loads(resources.files("job_schemas").joinpath("vc-config.json").read_text())
    Draft202012Validator.check_schema(schema)
    return [e.message for e in Draft202012Validator(schema).iter_errors(doc)]


def test_the_example_passes_the_schema_and_resolves() -> None:
    doc = yaml.safe_load(EXAMPLE)
    assert schema_errors(doc) == []
    cfg = parse_config(doc)
    research, prod, default = cfg.quotas(TOTAL)
    assert research.guaranteed == Resources(8, 32, 256_000)
    assert research.max == Resources(12, BIG, 10**18)
    assert research.lending_limit == Resources(2, BIG, 10**18)
    assert research.preemption.reclaim is Reclaim.LOWER_PRIORITY
    assert research.preemption.within_vc is WithinVc.LOWER_OR_NEWER_EQUAL_PRIORITY
    assert research.preemption.while_borrowing == WhileBorrowing(True, -1)
    assert research.strict_fifo
    assert (research.gpu_limit_for("alice"), research.gpu_limit_for("bob")) == (8, 4)
    assert prod.guaranteed == Resources(4, 16, 128_000) and prod.max is None and prod.lending_limit is None
    assert prod.preemption.reclaim is Reclaim.ANY and prod.preemption.within_vc is WithinVc.LOWER_PRIORITY
    assert (default.name, default.guaranteed) == ("default", Resources(4, 16, 128_000))
    assert cfg.priority("urgent") == 1000 and cfg.priority("prod") == 100
    assert cfg.scheduler == SchedulerConfig(0.25, 300, 600, 2, True)


def test_default_is_added_with_the_rest() -> None:
    quotas = parse_config({"virtualClusters": [{"name": "a", "guaranteed": {"gpu": 6}}]}).quotas(TOTAL)
    assert [(q.name, q.guaranteed) for q in quotas] == [("a", Resources(6, 0, 0)),
                                                         ("default", Resources(10, 64, 512_000))]


def test_an_empty_document_is_one_default_vc_with_everything() -> None:
    cfg = parse_config({})
    assert [(q.name, q.guaranteed) for q in cfg.quotas(TOTAL)] == [("default", TOTAL)]
    assert cfg == ClusterConfig()


def test_percents_follow_the_cluster_size() -> None:
    cfg = parse_config({"virtualClusters": [{"name": "a", "guaranteed": {"gpu": "25%"}}]})
    assert cfg.quotas(Resources(8, 0, 0))[0].guaranteed.gpu == 2
    assert cfg.quotas(Resources(40, 0, 0))[0].guaranteed.gpu == 10


@pytest.mark.parametrize(("doc", "message"), [
    ({"virtualClusters": [{"name": "a", "guaranteed": {"gpu": "60%"}}, {"name": "b", "guaranteed": {"gpu": "50%"}}]},
     "guarantees sum to 17 GPU"),
    ({"virtualClusters": [{"name": "a", "guaranteed": {"gpu": 8}, "max": {"gpu": 4}}]}, "exceeds max"),
    ({"virtualClusters": [{"name": "a"}, {"name": "a"}]}, "listed twice"),
    ({"priorityClasses": {"prod": 5}}, "cannot be redefined"),
])
def test_refused(doc: dict[str, Any], message: str) -> None:
    assert schema_errors(doc) == []  # the schema cannot see these; parse_config and quotas do
    with pytest.raises(InvalidParametersError) as err:
        parse_config(doc).quotas(TOTAL)
    assert message in err.value.message


def test_unknown_priority_class() -> None:
    with pytest.raises(InvalidParametersError) as err:
        parse_config({}).priority("urgent")
    assert "unknown priority class 'urgent'" in err.value.message


@pytest.mark.parametrize(("doc", "fragment"), [
    ({"virtualClusters": [{"guaranteed": {"gpu": 1}}]}, "'name' is a required property"),
    ({"virtualClusters": [{"name": "a", "guaranteed": {"gpu": "lots"}}]}, "is not valid under any"),
    ({"virtualClusters": [{"name": "a", "guaranteed": {"gpus": 1}}]}, "Additional properties"),
    ({"virtualClusters": [{"name": "a", "preemption": {"reclaim": "Sometimes"}}]}, "is not one of"),
    ({"virtualClusters": [{"name": "a", "max": {"gpu": -1}}]}, "is not valid under any"),
    ({"virtualClusters": []}, "should be non-empty"),
    ({"scheduler": {"maxPreemptionFraction": 0}}, "less than or equal to the minimum"),
    ({"priorityClasses": {"urgent": "high"}}, "is not of type 'integer'"),
    ({"vcs": []}, "Additional properties"),
    ({"scheduler": {"elastic": {"resizeIntervalSeconds": -1}}}, "less than the minimum"),
    ({"scheduler": {"elastic": {"resizeInterval": 5}}}, "Additional properties"),
])
def test_schema_refuses(doc: dict[str, Any], fragment: str) -> None:
    errors = schema_errors(doc)
    assert any(fragment in e for e in errors), errors


def test_non_preemptible_grants_are_read_and_their_classes_checked() -> None:
    doc = {"priorityClasses": {"urgent": 1000}, "nonPreemptible": {"priorityClasses": ["urgent", "prod"],
                                                                   "users": ["alice"], "groups": ["ops"]}}
    assert schema_errors(doc) == []
    grant = parse_config(doc).non_preemptible
    assert (grant.priority_classes, grant.users, grant.groups) == ({"urgent", "prod"}, {"alice"}, {"ops"})
    assert parse_config({}).non_preemptible.describe() == "admins"
    with pytest.raises(InvalidParametersError) as caught:
        parse_config({"nonPreemptible": {"priorityClasses": ["gold"]}})
    assert caught.value.field == "nonPreemptible.priorityClasses"
    assert caught.value.message.startswith("nonPreemptible.priorityClasses: 'gold' is not a priority class")
    assert schema_errors({"nonPreemptible": {"users": "alice"}}) == ["'alice' is not of type 'array'"]


def test_the_resize_interval_of_elastic_jobs_is_read_checked_and_defaults_to_a_minute() -> None:
    doc = {"scheduler": {"elastic": {"resizeIntervalSeconds": 15}}}
    assert schema_errors(doc) == []
    assert parse_config(doc).scheduler.resize_interval_seconds == 15.0
    assert parse_config({}).scheduler.resize_interval_seconds == 60.0
    with pytest.raises(InvalidParametersError) as err:  # what the schema would refuse, checked again here
        parse_config({"scheduler": {"elastic": {"resizeIntervalSeconds": "soon"}}})
    assert err.value.field == "scheduler.elastic.resizeIntervalSeconds"
    assert "'soon' is not a number of seconds from 0 to 31536000" in err.value.message
