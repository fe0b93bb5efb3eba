"""OpenPAI v2 YAML job (schema-checked) -> JobSpec: references resolved, deployments applied, templates rendered,
``cmd`` plugins' commands around each role's (:mod:`pai.jobspec.plugins`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pai.domain.errors import InvalidProtocolError
from pai.domain.jobspec import PRIORITY_CLASSES, JobSpec, PortSpec, RegistryAuth, TaskRoleSpec
from pai.domain.resources import Resources
from pai.jobspec.checks import require_shm_within_memory, require_unique, whole, whole_or_none
from pai.jobspec.elastic import with_ranges
from pai.jobspec.extras import Extras
from pai.jobspec.plugins import Render, check_role_prerequisites, wrap
from pai.jobspec.sshplugin import role_ssh
from pai.jobspec.storages import requested_mounts
from pai.jobspec.template import MAX_RENDERED, render

DEFAULT_SHM_MB = 64
DEFAULT_MIN_FAILED = 1
NEVER = -1  # minFailedInstances / minSucceededInstances: "no threshold"
# Task role field -> the prerequisite type it names.
REFERENCE_FIELDS = {"dockerImage": "dockerimage", "data": "data", "script": "script", "output": "output"}

Prerequisites = dict[str, dict[str, dict[str, Any]]]  # type -> name -> item


def normalize(config: dict[str, Any], classes: Mapping[str, int] = PRIORITY_CLASSES, *,
              hparams: Mapping[str, Any] | None = None) -> JobSpec:
    """``hparams``: a trial's hyperparameters, for ``<% $hparams.x %>`` (None: not a trial; the reference is an
    error)."""
    roles: dict[str, dict[str, Any]] = config["taskRoles"]
    prerequisites = _prerequisites(config["prerequisites"])
    check_role_prerequisites(roles, config["prerequisites"])
    secrets: dict[str, Any] = config.get("secrets") or {}
    auths = _image_auths(config["prerequisites"], secrets)
    wrappers = _deployment(config, roles)
    extras = Extras.read(config.get("extras"), list(roles), classes)
    scope = {"parameters": config.get("parameters") or {}, "secrets": secrets}
    if hparams is not None:
        scope["hparams"] = dict(hparams)
    task_roles = tuple(
        _role(name, role, prerequisites, scope, wrappers.get(name, {}), extras.sku_types.get(name), auths, config)
        for name, role in roles.items()
    )
    defaults: dict[str, Any] = config.get("defaults") or {}
    return JobSpec(
        name=config["name"],
        task_roles=with_ranges(config, extras.with_selectors(task_roles)),
        protocol_version=2,
        virtual_cluster=defaults.get("virtualCluster") or "default",
        retry_count=whole(config.get("jobRetryCount", 0)),
        priority_class=extras.priority_class,
        priority=extras.priority,
        gang=extras.gang,
        preemptible=extras.preemptible,
        node_selector=extras.node_selector,
        whole_nodes=extras.whole_nodes,
        expected_seconds=extras.expected_seconds,
        storages=requested_mounts(config.get("extras")),
        secrets=secrets if "secrets" in config else None,
    )


def _prerequisites(items: list[dict[str, Any]]) -> Prerequisites:
    out: Prerequisites = {kind: {} for kind in REFERENCE_FIELDS.values()}
    for kind in out:  # OpenPAI keeps one namespace per type: an image and a script may share a name
        named = ((f"prerequisites[{i}].name", p["name"]) for i, p in enumerate(items) if p["type"] == kind)
        require_unique(named, f"{kind} prerequisite")
    for item in items:
        out[item["type"]][item["name"]] = item
    return out


def _image_auths(items: list[dict[str, Any]], secrets: dict[str, Any]) -> dict[str, RegistryAuth]:
    """Image prerequisite name -> its registry ``auth``, secrets rendered (an unknown secret is an error now,
    whether or not a role uses the image, not at pull time)."""
    return {item["name"]: _auth(i, item["auth"], secrets) for i, item in enumerate(items)
            if item["type"] == "dockerimage" and item.get("auth")}


def _auth(i: int, auth: dict[str, Any], secrets: dict[str, Any]) -> RegistryAuth:
    value = {key: render(str(v), {"secrets": secrets}, f"prerequisites[{i}].auth.{key}", blank_unknown=bool(secrets))
             for key, v in auth.items()}
    return RegistryAuth(value.get("username", ""), value.get("password", ""), value.get("registryuri", ""))


def _deployment(config: dict[str, Any], roles: dict[str, Any]) -> dict[str, dict[str, tuple[str, list[str]]]]:
    """Role -> {"preCommands"|"postCommands": (field path, commands)} of the default deployment."""
    deployments: list[dict[str, Any]] = config.get("deployments") or []
    require_unique(((f"deployments[{i}].name", d["name"]) for i, d in enumerate(deployments)), "deployment")
    for i, d in enumerate(deployments):
        for role in d["taskRoles"]:
            if role not in roles:
                path = f"deployments[{i}].taskRoles.{role}"
                raise InvalidProtocolError(f"{path}: names no task role", field=path)
    chosen = (config.get("defaults") or {}).get("deployment")
    if chosen is None:
        return {}
    for i, d in enumerate(deployments):
        if d["name"] == chosen:
            return {
                role: {k: (f"deployments[{i}].taskRoles.{role}.{k}", v) for k, v in hooks.items()}
                for role, hooks in d["taskRoles"].items()
            }
    raise InvalidProtocolError(f"defaults.deployment: {chosen!r} names no deployment", field="defaults.deployment")


def _role(
    name: str,
    role: dict[str, Any],
    prerequisites: Prerequisites,
    scope: dict[str, Any],
    hooks: dict[str, tuple[str, list[str]]],
    gpu_type: str | None,
    auths: dict[str, RegistryAuth],
    config: dict[str, Any],
) -> TaskRoleSpec:
    path = f"taskRoles.{name}"
    refs: dict[str, dict[str, Any]] = {}
    for field_name, kind in REFERENCE_FIELDS.items():
        if field_name in role:
            target = role[field_name]
            if target not in prerequisites[kind]:
                where = f"{path}.{field_name}"
                raise InvalidProtocolError(f"{where}: {target!r} names no {kind} prerequisite", field=where)
            refs[kind] = prerequisites[kind][target]
    resources: dict[str, Any] = role["resourcePerInstance"]
    shm_mb = whole((role.get("extraContainerOptions") or {}).get("shmMB", DEFAULT_SHM_MB))
    memory_mb = whole(resources["memoryMB"])
    require_shm_within_memory(f"{path}.extraContainerOptions.shmMB", shm_mb, memory_mb)
    completion: dict[str, Any] = role.get("completion") or {}
    role_scope = {**scope, **{k: v for k, v in refs.items() if k != "dockerimage"}}
    budget = [MAX_RENDERED]  # the role's command, every line joined (plugins' too), stays within one limit

    def render_at(text: str, where: str) -> str:
        rendered = render(text.strip(), role_scope, where, limit=budget[0], blank_unknown=bool(scope["secrets"]))
        budget[0] -= len(rendered) + 1
        return rendered

    return TaskRoleSpec(
        name=name,
        instances=whole(role.get("instances", 1)),
        command=wrap("\n".join(_commands(path, role, hooks, render_at)), name, role, config, render_at),
        resources=Resources(gpu=whole(resources["gpu"]), cpu=whole(resources["cpu"]), memory_mb=memory_mb),
        image=refs["dockerimage"]["uri"],
        shm_mb=shm_mb,
        ports=tuple(PortSpec(label, count=whole(n)) for label, n in (resources.get("ports") or {}).items()),
        min_failed=_threshold(completion, "minFailedInstances", f"{path}.completion", DEFAULT_MIN_FAILED),
        min_succeeded=_threshold(completion, "minSucceededInstances", f"{path}.completion", None),
        task_retry_count=whole(role.get("taskRetryCount", 0)),
        gpu_type=gpu_type,
        image_auth=auths.get(refs["dockerimage"]["name"]),
        ssh=role_ssh(name, role, config),
    )


def _commands(
    path: str, role: dict[str, Any], hooks: dict[str, tuple[str, list[str]]], render_at: Render
) -> list[str]:
    parts = [hooks["preCommands"]] if "preCommands" in hooks else []
    parts.append((f"{path}.commands", role["commands"]))
    if "postCommands" in hooks:
        parts.append(hooks["postCommands"])
    return [render_at(command, f"{where}[{i}]") for where, commands in parts for i, command in enumerate(commands)]


def _threshold(completion: dict[str, Any], key: str, path: str, default: int | None) -> int | None:
    """-1 and null mean "no threshold" (None); 0 is neither a threshold nor OpenPAI's spelling of none."""
    value = whole_or_none(completion.get(key, default))
    if value == 0:
        where = f"{path}.{key}"
        raise InvalidProtocolError(f"{where}: 0 is not allowed (use -1 or a count of at least 1)", field=where)
    return None if value is None or value == NEVER else value
