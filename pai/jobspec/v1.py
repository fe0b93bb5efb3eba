"""OpenPAI v1 JSON job (schema-checked) -> JobSpec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pai.domain.jobspec import PRIORITY_CLASSES, JobSpec, PortSpec, TaskRoleSpec
from pai.domain.pathvars import PATH_FIELDS, expand
from pai.domain.resources import Resources
from pai.jobspec.checks import (
    require_code_dir,
    require_port_range,
    require_shm_within_memory,
    require_unique,
    whole,
    whole_or_none,
)
from pai.jobspec.elastic import with_ranges
from pai.jobspec.extras import Extras

DEFAULT_SHM_MB = 64
DEFAULT_MIN_FAILED = 1


def normalize(config: dict[str, Any], classes: Mapping[str, int] = PRIORITY_CLASSES) -> JobSpec:
    roles: list[dict[str, Any]] = config["taskRoles"]
    require_unique(((f"taskRoles[{i}].name", r["name"]) for i, r in enumerate(roles)), "task role name")
    extras = Extras.read(config.get("extras"), [r["name"] for r in roles], classes)
    image: str = config["image"]
    name: str = config["jobName"]
    code_dir, data_dir, output_dir = (expand(config.get(f, ""), job_name=name) for f in PATH_FIELDS.values())
    require_code_dir("codeDir", code_dir)
    gpu_type = config.get("gpuType") or None
    return JobSpec(
        name=name,
        task_roles=with_ranges(config, extras.with_selectors(
            tuple(_role(i, r, image, extras.sku_types.get(r["name"], gpu_type)) for i, r in enumerate(roles)))),
        protocol_version=1,
        virtual_cluster=config.get("virtualCluster") or "default",
        retry_count=whole(config.get("retryCount", 0)),
        image=image,
        code_dir=code_dir,  # $PAI_USER_NAME, $PAI_DEFAULT_FS_URI: replaced at submission (pathvars.bind)
        data_dir=data_dir,
        output_dir=output_dir,
        job_envs={k: env_value(v) for k, v in (config.get("jobEnvs") or {}).items()},
        gpu_type=gpu_type,
        priority_class=extras.priority_class,
        priority=extras.priority,
        gang=extras.gang,
        preemptible=extras.preemptible,
        node_selector=extras.node_selector,
        whole_nodes=extras.whole_nodes,
        expected_seconds=extras.expected_seconds,
    )


def env_value(value: str | int | float | bool) -> str:
    """A ``jobEnvs`` value as the container sees it (booleans as JSON spells them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _role(index: int, role: dict[str, Any], image: str, gpu_type: str | None) -> TaskRoleSpec:
    path = f"taskRoles[{index}]"
    shm_mb, memory_mb = whole(role.get("shmMB", DEFAULT_SHM_MB)), whole(role["memoryMB"])
    require_shm_within_memory(f"{path}.shmMB", shm_mb, memory_mb)
    port_list: list[dict[str, Any]] = role.get("portList") or []
    require_unique(((f"{path}.portList[{i}].label", p["label"]) for i, p in enumerate(port_list)), "port label")
    for i, p in enumerate(port_list):
        require_port_range(f"{path}.portList[{i}].portNumber", whole(p["beginAt"]), whole(p["portNumber"]))
    return TaskRoleSpec(
        name=role["name"],
        instances=whole(role["taskNumber"]),
        command=role["command"],
        resources=Resources(gpu=whole(role["gpuNumber"]), cpu=whole(role["cpuNumber"]), memory_mb=memory_mb),
        image=image,
        shm_mb=shm_mb,
        ports=tuple(
            PortSpec(p["label"], count=whole(p["portNumber"]), begin_at=whole(p["beginAt"])) for p in port_list
        ),
        min_failed=whole_or_none(role.get("minFailedTaskCount", DEFAULT_MIN_FAILED)),
        min_succeeded=whole_or_none(role.get("minSucceededTaskCount")),
        gpu_type=gpu_type,
    )
