"""v1 JSON -> JobSpec: field mapping, defaults and OpenPAI's null semantics."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest

from pai.domain import JobSpec, PortSpec, Resources, TaskRoleSpec
from pai.domain.jobspec import PRIORITY_CLASSES
from pai.jobspec import parse_job

from .builders import parse_v1, v1_job, v1_role


def _case(name: str) -> JobSpec:
    body = (resources.files("job_schemas") / "cases" / "v1" / "valid" / name).read_bytes()
    return parse_job(body, "application/json").spec


def test_full_job_maps_every_field() -> None:
    spec = _case("full.json")
    assert spec.name == "full.job-1_x"
    assert spec.protocol_version == 1
    assert spec.image == "pai/cuda:11"
    assert (spec.code_dir, spec.data_dir, spec.output_dir) == (
        "file:///shared/code",
        "hdfs://nn:9000/data",
        "hdfs://nn:9000/out",
    )
    assert spec.virtual_cluster == "dev"
    assert spec.retry_count == 3
    assert spec.gpu_type == "A100"
    assert spec.job_envs == {"LR": "0.1", "EPOCHS": "10", "DEBUG": "true", "NAME": "x"}
    assert (spec.priority_class, spec.priority) == ("prod", PRIORITY_CLASSES["prod"])
    assert spec.gang is False
    assert spec.task_roles == (
        TaskRoleSpec(
            name="ps",
            instances=1,
            command="python ps.py",
            resources=Resources(gpu=0, cpu=2, memory_mb=1024),
            image="pai/cuda:11",
            shm_mb=128,
            ports=(PortSpec("grpc", count=2, begin_at=0),),
            min_failed=None,
            min_succeeded=None,
            gpu_type="K80",  # extras.hivedScheduler.taskRoles.ps.skuType wins over the job's gpuType
        ),
        TaskRoleSpec(
            name="worker",
            instances=4,
            command="python worker.py",
            resources=Resources(gpu=2, cpu=4, memory_mb=8192),
            image="pai/cuda:11",
            min_failed=2,
            min_succeeded=4,
            gpu_type="A100",
        ),
    )
    assert spec.total == Resources(gpu=8, cpu=18, memory_mb=1024 + 4 * 8192)


@pytest.mark.parametrize(
    ("role_fields", "expected"),
    [
        pytest.param({}, (1, None), id="absent: fail on the first failure, succeed when all succeed"),
        pytest.param({"minFailedTaskCount": None}, (None, None), id="null min failed: never fail"),
        pytest.param({"minFailedTaskCount": 3, "minSucceededTaskCount": 2}, (3, 2), id="explicit counts"),
        pytest.param({"minSucceededTaskCount": None}, (1, None), id="null min succeeded: all must succeed"),
    ],
)
def test_completion_thresholds(role_fields: dict[str, Any], expected: tuple[int | None, int | None]) -> None:
    role = parse_v1(v1_job(v1_role(taskNumber=4, **role_fields))).spec.task_roles[0]
    assert (role.min_failed, role.min_succeeded) == expected


@pytest.mark.parametrize(
    ("job_fields", "attribute", "expected"),
    [
        pytest.param({}, "virtual_cluster", "default", id="virtualCluster defaults to default"),
        pytest.param({"virtualCluster": ""}, "virtual_cluster", "default", id="empty virtualCluster is default"),
        pytest.param({"gpuType": ""}, "gpu_type", None, id="empty gpuType is any"),
        pytest.param({}, "retry_count", 0, id="retryCount defaults to 0"),
        pytest.param({}, "priority_class", "test", id="priority class defaults to test"),
        pytest.param({"extras": {"hivedScheduler": {"jobPriorityClass": "oppo"}}}, "priority", -1, id="oppo"),
        pytest.param({}, "gang", True, id="gang allocation by default"),
        pytest.param({"extras": {"gangAllocation": False}}, "gang", False, id="gangAllocation false"),
        pytest.param({}, "preemptible", True, id="preemptible by default"),
        pytest.param({"extras": {"preemptible": False}}, "preemptible", False, id="non-preemptible"),
        pytest.param({}, "expected_seconds", None, id="no expected duration"),
        pytest.param({"extras": {"expectedDurationSeconds": 5400}}, "expected_seconds", 5400.0, id="expected duration"),
        pytest.param({"jobEnvs": {"OFF": False, "N": 0}}, "job_envs", {"OFF": "false", "N": "0"}, id="envs"),
        pytest.param({"codeDir": "hdfs://nn:9000/code"}, "code_dir", "hdfs://nn:9000/code", id="codeDir"),
    ],
)
def test_job_level_defaults(job_fields: dict[str, Any], attribute: str, expected: object) -> None:
    assert getattr(parse_v1(v1_job(**job_fields)).spec, attribute) == expected


def test_role_defaults() -> None:
    role = parse_v1(v1_job()).spec.task_roles[0]
    assert role.shm_mb == 64
    assert role.ports == ()
    assert role.task_retry_count == 0
    assert role.image == "busybox"
    assert role.gpu_type is None
    assert [p.label for p in role.all_ports()] == ["http", "ssh"]


def test_job_gpu_type_applies_to_every_role() -> None:
    spec = parse_v1(v1_job(v1_role(name="a"), v1_role(name="b"), gpuType="V100")).spec
    assert [r.gpu_type for r in spec.task_roles] == ["V100", "V100"]


def test_roles_keep_their_order_and_port_list() -> None:
    ports = [{"label": "http", "beginAt": 8080, "portNumber": 1}, {"label": "nccl", "beginAt": 0, "portNumber": 3}]
    spec = parse_v1(v1_job(v1_role(name="z", portList=ports), v1_role(name="a"))).spec
    assert [r.name for r in spec.task_roles] == ["z", "a"]
    assert spec.role("z").ports == (PortSpec("http", 1, 8080), PortSpec("nccl", 3, 0))
    assert [p.label for p in spec.role("z").all_ports()] == ["ssh", "http", "nccl"]


def test_integral_floats_become_ints() -> None:
    role = parse_v1(v1_job(v1_role(taskNumber=2.0, cpuNumber=1.0, memoryMB=512.0, shmMB=128.0))).spec.task_roles[0]
    assert (role.instances, role.resources, role.shm_mb) == (2, Resources(gpu=0, cpu=1, memory_mb=512), 128)
    assert all(type(n) is int for n in (role.instances, role.resources.cpu, role.resources.memory_mb, role.shm_mb))
