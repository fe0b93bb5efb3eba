"""What a job asks for that pai accepts but does not do on this cluster, as warnings naming the field.

Such a field is never dropped in silence: the submission's answer lists it and the job's history records it (an
event of kind ``warning``). Fields that only inform (``description``, ``extras.submitFrom``, hived's ``skuNum``,
which OpenPAI's hived middleware recomputes from ``resourcePerInstance`` as pai does) are not warned about.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pai.domain.jobspec import SpecWarning
from pai.jobspec.plugins import PREFIX, plugin_warnings
from pai.jobspec.schema import ProtocolVersion
from pai.jobspec.sshplugin import ssh_warnings

HIVED = "hivedScheduler"
_EXTRAS = {
    ProtocolVersion.V1: frozenset({HIVED, "gangAllocation", "preemptible", "submitFrom", "nodeSelector", "wholeNodes",
                                   "expectedDurationSeconds", "elastic"}),
    ProtocolVersion.V2: frozenset({HIVED, "gangAllocation", "preemptible", "submitFrom", "storages", PREFIX,
                                   "nodeSelector", "wholeNodes", "expectedDurationSeconds", "elastic"}),
}
_HIVED_READ = frozenset({"jobPriorityClass", "taskRoles"})
_HIVED_ROLE_READ = frozenset({"skuType", "gpuType", "skuNum", "skuNumber", "nodeSelector"})
_CONTAINER_OPTIONS_READ = frozenset({"shmMB"})
_DEFAULTS_READ = frozenset({"virtualCluster", "deployment"})


def unhonoured(config: dict[str, Any], version: ProtocolVersion) -> tuple[SpecWarning, ...]:
    """The warnings of a schema-valid, normalized spec, in document order."""
    found = [*_top_level(config, version), *_extras(config.get("extras") or {}, version)]
    if version is ProtocolVersion.V2:
        found += [*_v2_roles(config), *_prerequisites(config), *plugin_warnings(config), *ssh_warnings(config)]
    return tuple(found)


def _top_level(config: dict[str, Any], version: ProtocolVersion) -> Iterator[SpecWarning]:
    if version is ProtocolVersion.V1:
        if config.get("authFile"):
            yield SpecWarning("authFile", "not used: images are pulled without a registry credentials file"
                              " (v2 jobs give credentials in a dockerimage prerequisite's auth)")
        if "killAllOnCompletedTaskNumber" in config:
            yield SpecWarning("killAllOnCompletedTaskNumber", "killAllOnCompletedTaskNumber has been obsoleted,"
                              " please use minFailedTaskCount and minSucceededTaskCount instead (ignored)")
    else:
        yield from _unread(config.get("defaults") or {}, _DEFAULTS_READ, "defaults")


def _extras(extras: Mapping[str, Any], version: ProtocolVersion) -> Iterator[SpecWarning]:
    yield from _unread(extras, _EXTRAS[version], "extras")
    hived: Mapping[str, Any] = extras.get(HIVED) or {}
    yield from _unread(hived, _HIVED_READ, f"extras.{HIVED}")
    for role, options in (hived.get("taskRoles") or {}).items():
        yield from _unread(options, _HIVED_ROLE_READ, f"extras.{HIVED}.taskRoles.{role}")


def _v2_roles(config: dict[str, Any]) -> Iterator[SpecWarning]:
    for name, role in config["taskRoles"].items():
        options: Mapping[str, Any] = role.get("extraContainerOptions") or {}
        path = f"taskRoles.{name}.extraContainerOptions"
        if options.get("infiniband"):
            yield SpecWarning(f"{path}.infiniband", "not honoured: no InfiniBand devices are given to containers on"
                              " this cluster")
        yield from _unread(options, _CONTAINER_OPTIONS_READ | {"infiniband"}, path)


def _prerequisites(config: dict[str, Any]) -> Iterator[SpecWarning]:
    for i, item in enumerate(config["prerequisites"]):
        if item.get("require"):
            yield SpecWarning(f"prerequisites[{i}].require", "not followed (OpenPAI does not either): list every"
                              " prerequisite a role needs in taskRoles.<role>.prerequisites")


def _unread(mapping: Mapping[str, Any], read: frozenset[str], path: str) -> Iterator[SpecWarning]:
    """A warning for every key of ``mapping`` pai does not read, unless its value is null."""
    for key, value in mapping.items():
        if key not in read and value is not None:
            yield SpecWarning(f"{path}.{key}", "accepted and not used on this cluster")
