"""Elastic roles (issue 31): ``extras.elastic.<role>: {minInstances, maxInstances}``, v1 and v2 alike.

The role's ``instances`` (v2) / ``taskNumber`` (v1) is the size it asks for first; the job is admitted as a gang
at its roles' minima and may grow toward their maxima. The schema (job_schemas/v1.json, v2.json ``$defs.elastic``)
states each entry's shape: both keys, integers of at least 1, nothing else. :func:`check_elastic` states what a
schema cannot, on a schema-valid spec, before it is normalized:

- every entry names a task role of the job;
- ``minInstances <= maxInstances`` and ``minInstances <= instances <= maxInstances``;
- ``maxInstances`` within the cluster's ``limits.tasksPerRole``, and the job at its maxima within ``tasksPerJob``;
- no ``extras.gangAllocation: false``: an elastic job is a gang at its minimum.

``minInstances == maxInstances`` is accepted: the role keeps that size (it is not elastic in effect).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from pai.domain.errors import InvalidProtocolError
from pai.domain.jobspec import ElasticRange, TaskRoleSpec
from pai.domain.limits import JobLimits
from pai.jobspec.checks import whole
from pai.jobspec.paths import join_path
from pai.jobspec.schema import ProtocolVersion

ELASTIC_FIELD = "extras.elastic"
RULE = "(minInstances <= instances <= maxInstances)"


def entries(config: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``extras.elastic`` of a schema-valid spec (role -> entry); {} when absent or null."""
    extras: Mapping[str, Any] = config.get("extras") or {}
    return dict(extras.get("elastic") or {})


def check_elastic(config: dict[str, Any], version: ProtocolVersion, limits: JobLimits) -> None:
    """Raise :class:`InvalidProtocolError` (naming the field and the rule) for an ``extras.elastic`` that breaks
    a rule of this module's docstring."""
    elastic = entries(config)
    if not elastic:
        return
    if (config.get("extras") or {}).get("gangAllocation") is False:
        raise InvalidProtocolError(
            f"{ELASTIC_FIELD}: not allowed with extras.gangAllocation: false (an elastic job is admitted as a gang"
            " at its minimum)", field=ELASTIC_FIELD)
    sizes = dict(_sizes(config, version))
    for role, entry in elastic.items():
        path = join_path(ELASTIC_FIELD, role)
        if role not in sizes:
            raise InvalidProtocolError(f"{path}: names no task role (roles: {', '.join(sizes)})", field=path)
        _check_entry(path, whole(entry["minInstances"]), whole(entry["maxInstances"]), *sizes[role], limits)
    at_most = sum(whole(elastic[role]["maxInstances"]) if role in elastic else n for role, (_, n) in sizes.items())
    if at_most > limits.tasks_per_job:
        raise InvalidProtocolError(
            f"{ELASTIC_FIELD}: {at_most} tasks in all at the roles' maxInstances is greater than the maximum of"
            f" {limits.tasks_per_job} (cluster limit tasksPerJob)", field=ELASTIC_FIELD)


def _check_entry(path: str, low: int, high: int, size_path: str, size: int, limits: JobLimits) -> None:
    if low > high:
        raise InvalidProtocolError(f"{path}: minInstances {low} is greater than maxInstances {high}", field=path)
    if low > size:
        where = f"{path}.minInstances"
        raise InvalidProtocolError(f"{where}: {low} is greater than {size_path} {size} {RULE}", field=where)
    if size > high:
        where = f"{path}.maxInstances"
        raise InvalidProtocolError(f"{where}: {high} is less than {size_path} {size} {RULE}", field=where)
    if high > limits.tasks_per_role:
        where = f"{path}.maxInstances"
        raise InvalidProtocolError(
            f"{where}: {high} is greater than the maximum of {limits.tasks_per_role} (cluster limit tasksPerRole)",
            field=where)


def _sizes(config: dict[str, Any], version: ProtocolVersion) -> Iterator[tuple[str, tuple[str, int]]]:
    """role -> (the field of its first size, that size), in document order."""
    if version is ProtocolVersion.V1:
        for i, r in enumerate(config["taskRoles"]):
            yield r["name"], (f"taskRoles[{i}].taskNumber", whole(r["taskNumber"]))
    else:
        for name, r in config["taskRoles"].items():
            yield name, (join_path("taskRoles", name) + ".instances", whole(r.get("instances", 1)))


def with_ranges(config: Mapping[str, Any], roles: tuple[TaskRoleSpec, ...]) -> tuple[TaskRoleSpec, ...]:
    """The roles, each with its (checked) elastic range; a role without one keeps ``elastic=None``."""
    elastic = entries(config)
    if not elastic:
        return roles
    return tuple(
        replace(r, elastic=ElasticRange(whole(elastic[r.name]["minInstances"]), whole(elastic[r.name]["maxInstances"])))
        if r.name in elastic else r for r in roles)
