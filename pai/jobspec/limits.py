"""The cluster's job-size limits (``limits`` of the cluster configuration), checked on a schema-valid spec before
it is normalized, so that an oversized job is refused before anything is built for its tasks; an elastic job's
ranges (:mod:`pai.jobspec.elastic`) are checked here too, at the sizes it may grow to."""

from __future__ import annotations

from typing import Any

from pai.domain.errors import InvalidProtocolError
from pai.domain.limits import JobLimits
from pai.jobspec.checks import whole
from pai.jobspec.elastic import check_elastic
from pai.jobspec.schema import ProtocolVersion


def role_sizes(config: dict[str, Any], version: ProtocolVersion) -> list[tuple[str, int]]:
    """``(field path, instances)`` of every task role of a schema-valid spec."""
    if version is ProtocolVersion.V1:
        return [(f"taskRoles[{i}].taskNumber", whole(r["taskNumber"])) for i, r in enumerate(config["taskRoles"])]
    return [(f"taskRoles.{name}.instances", whole(r.get("instances", 1))) for name, r in config["taskRoles"].items()]


def check_job_limits(config: dict[str, Any], version: ProtocolVersion, limits: JobLimits) -> None:
    sizes = role_sizes(config, version)
    for path, instances in sizes:
        if instances > limits.tasks_per_role:
            raise InvalidProtocolError(
                f"{path}: {instances} is greater than the maximum of {limits.tasks_per_role}"
                " (cluster limit tasksPerRole)",
                field=path,
            )
    total = sum(instances for _, instances in sizes)
    if total > limits.tasks_per_job:
        raise InvalidProtocolError(
            f"taskRoles: {total} tasks in all is greater than the maximum of {limits.tasks_per_job}"
            " (cluster limit tasksPerJob)",
            field="taskRoles",
        )
    check_elastic(config, version, limits)
