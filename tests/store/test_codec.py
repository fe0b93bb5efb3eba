"""The JobSpec codec round-trips exactly; Task and Node survive a trip through their rows."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from pai.domain.job import Task
from pai.domain.jobspec import ElasticRange, JobSpec, PortSpec, TaskRoleSpec
from pai.domain.node import Node, NodeState
from pai.domain.resources import Resources
from pai.domain.states import TaskState
from pai.store.codec import (
    node_from_row,
    spec_from_dict,
    spec_to_dict,
    task_from_row,
    task_to_row,
    update_node_row,
)
from pai.store.schema import NodeRow

from .builders import full_spec, node, role, spec


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(spec(), id="minimal"),
        pytest.param(full_spec(), id="every field set"),
        pytest.param(spec("multi", role("a", 1), role("b", 3), role("c", 2)), id="role order kept"),
    ],
)
def test_spec_round_trip_through_json(value: JobSpec) -> None:
    stored = json.loads(json.dumps(spec_to_dict(value)))
    assert spec_from_dict(stored) == value


@pytest.mark.parametrize(
    ("cls", "sample"),
    [
        pytest.param(JobSpec, full_spec(), id="JobSpec"),
        pytest.param(TaskRoleSpec, full_spec().task_roles[1], id="TaskRoleSpec"),
        pytest.param(PortSpec, full_spec().task_roles[1].ports[0], id="PortSpec"),
        pytest.param(ElasticRange, full_spec().task_roles[1].elastic, id="ElasticRange"),
    ],
)
def test_full_spec_sets_every_field(cls: type, sample: object) -> None:
    """Guards the round-trip test: a field added to the domain must be set here, or this fails."""
    defaults = {f.name: f.default for f in fields(cls)}
    unchanged = [name for name, default in defaults.items() if getattr(sample, name) == default]
    # JobSpec.sealed is the ``sealed`` column (pai.store.sealing), not a key of the spec's JSON
    assert unchanged == (["sealed"] if cls is JobSpec else [])


def test_missing_keys_take_defaults_and_unknown_keys_are_ignored() -> None:
    stored = {
        "name": "old",
        "task_roles": [{"name": "w", "instances": 2, "command": "run", "resources": {"gpu": 1}, "future": 1}],
        "added_later": True,
    }
    assert spec_from_dict(stored) == spec("old", role("w", 2, command="run", resources=Resources(1)))


def test_job_envs_keep_their_order() -> None:
    assert list(spec_from_dict(spec_to_dict(full_spec())).job_envs) == ["B", "A", "EMPTY"]


@pytest.mark.parametrize(
    "task",
    [
        pytest.param(Task("worker", 0), id="waiting"),
        pytest.param(
            Task(
                "ps",
                3,
                state=TaskState.FAILED,
                node="n7",
                address="10.0.0.7",
                ports={"http": (20001,), "grpc": (20002, 20003)},
                gpus=(0, 3),
                attempt_id="a-1",
                exit_code=137,
                exit_reason="OOM killed",
                retries=2,
                started_at=1.25,
                finished_at=9.5,
            ),
            id="finished with everything",
        ),
    ],
)
def test_task_round_trip_through_row(task: Task) -> None:
    row = task_to_row("job-id", task)
    assert (row.job_id, row.role, row.task_index) == ("job-id", task.role, task.index)
    assert task_from_row(row) == task


def test_node_round_trip_through_row() -> None:
    value = node(
        "gpu-3",
        gpu_type="A100",
        labels={"rack": "r1"},
        state=NodeState.CORDONED,
        last_heartbeat=12.5,
        port_range=(30000, 31000),
        failed_gpus=(2,),
        log_port=9102,
        admin_state=NodeState.CORDONED,
        problems=("docker engine unreachable",),
        gpu_memory_mb=40960,
    )
    defaults = {f.name: f.default for f in fields(Node)}
    assert [n for n, d in defaults.items() if getattr(value, n) == d] == []  # every field set, or this fails
    row = NodeRow(name=value.name)
    update_node_row(row, value)
    assert node_from_row(row) == value
