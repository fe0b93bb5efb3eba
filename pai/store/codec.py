"""Rows <-> domain values: JobSpec as JSON, Task and Node as table rows.

``spec_to_dict``/``spec_from_dict`` round-trip exactly. Keys are the dataclass field names; a key missing
from a stored dict takes the field's default, so adding a scalar field to the domain needs no data migration.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from pai.domain.job import Task
from pai.domain.jobspec import ElasticRange, JobSpec, PortSpec, RegistryAuth, SshPlugin, TaskRoleSpec
from pai.domain.node import Node, NodeState
from pai.domain.resources import Resources
from pai.domain.states import TaskState
from pai.domain.storage import StorageMount
from pai.store.schema import NodeRow, TaskRow

_SPEC_FIELDS = frozenset(f.name for f in fields(JobSpec)) - {"sealed"}  # a column of its own (pai.store.sealing)
_ROLE_FIELDS = frozenset(f.name for f in fields(TaskRoleSpec))
_PORT_FIELDS = frozenset(f.name for f in fields(PortSpec))
_AUTH_FIELDS = frozenset(f.name for f in fields(RegistryAuth))
_MOUNT_FIELDS = frozenset(f.name for f in fields(StorageMount))
_RANGE_FIELDS = frozenset(f.name for f in fields(ElasticRange))


def _scalars(value: object, names: frozenset[str]) -> dict[str, Any]:
    return {name: getattr(value, name) for name in sorted(names)}


def _known(d: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k in names}


def role_to_dict(role: TaskRoleSpec) -> dict[str, Any]:
    d = _scalars(role, _ROLE_FIELDS)
    d["resources"] = role.resources.to_dict()
    d["ports"] = [_scalars(p, _PORT_FIELDS) for p in role.ports]
    d["image_auth"] = None if role.image_auth is None else _scalars(role.image_auth, _AUTH_FIELDS)
    d["ssh"] = None if role.ssh is None else {"job_ssh": role.ssh.job_ssh, "user_keys": list(role.ssh.user_keys)}
    d["elastic"] = None if role.elastic is None else _scalars(role.elastic, _RANGE_FIELDS)
    return d


def role_from_dict(d: dict[str, Any]) -> TaskRoleSpec:
    kwargs = _known(d, _ROLE_FIELDS)
    kwargs["resources"] = Resources.from_dict(d["resources"])
    kwargs["ports"] = tuple(PortSpec(**_known(p, _PORT_FIELDS)) for p in d.get("ports", ()))
    auth = d.get("image_auth")
    kwargs["image_auth"] = None if auth is None else RegistryAuth(**_known(auth, _AUTH_FIELDS))
    ssh = d.get("ssh")
    kwargs["ssh"] = None if ssh is None else SshPlugin(bool(ssh.get("job_ssh")), tuple(ssh.get("user_keys") or ()))
    elastic = d.get("elastic")
    kwargs["elastic"] = None if elastic is None else ElasticRange(**_known(elastic, _RANGE_FIELDS))
    return TaskRoleSpec(**kwargs)


def spec_to_dict(spec: JobSpec) -> dict[str, Any]:
    d = _scalars(spec, _SPEC_FIELDS)
    d["task_roles"] = [role_to_dict(r) for r in spec.task_roles]
    d["job_envs"] = dict(spec.job_envs)
    d["storages"] = [_scalars(m, _MOUNT_FIELDS) for m in spec.storages]
    return d


def spec_from_dict(d: dict[str, Any]) -> JobSpec:
    kwargs = _known(d, _SPEC_FIELDS)
    kwargs["task_roles"] = tuple(role_from_dict(r) for r in d["task_roles"])
    kwargs["job_envs"] = dict(d.get("job_envs", {}))
    kwargs["storages"] = tuple(StorageMount(**_known(m, _MOUNT_FIELDS)) for m in d.get("storages", ()))
    return JobSpec(**kwargs)


def task_to_row(job_id: str, task: Task) -> TaskRow:
    row = TaskRow(job_id=job_id, role=task.role, task_index=task.index)
    update_task_row(row, task)
    return row


def update_task_row(row: TaskRow, task: Task) -> None:
    row.state = task.state.value
    row.node = task.node
    row.address = task.address
    row.ports = {label: list(ports) for label, ports in task.ports.items()}
    row.gpus = list(task.gpus)
    row.attempt_id = task.attempt_id
    row.exit_code = task.exit_code
    row.exit_reason = task.exit_reason
    row.retries = task.retries
    row.started_at = task.started_at
    row.finished_at = task.finished_at


def task_from_row(row: TaskRow) -> Task:
    return Task(
        role=row.role,
        index=row.task_index,
        state=TaskState(row.state),
        node=row.node,
        address=row.address,
        ports={label: tuple(ports) for label, ports in row.ports.items()},
        gpus=tuple(row.gpus),
        attempt_id=row.attempt_id,
        exit_code=row.exit_code,
        exit_reason=row.exit_reason,
        retries=row.retries,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


def update_node_row(row: NodeRow, node: Node) -> None:
    row.address = node.address
    row.gpu = node.total.gpu
    row.cpu = node.total.cpu
    row.memory_mb = node.total.memory_mb
    row.gpu_type = node.gpu_type
    row.labels = dict(node.labels)
    row.state = node.state.value
    row.last_heartbeat = node.last_heartbeat
    row.failed_gpus = list(node.failed_gpus)
    row.port_low, row.port_high = node.port_range
    row.log_port = node.log_port
    row.admin_state = None if node.admin_state is None else node.admin_state.value
    row.problems = list(node.problems)
    row.gpu_memory_mb = node.gpu_memory_mb


def node_from_row(row: NodeRow) -> Node:
    return Node(
        name=row.name,
        address=row.address,
        total=Resources(row.gpu, row.cpu, row.memory_mb),
        gpu_type=row.gpu_type,
        labels=dict(row.labels),
        state=NodeState(row.state),
        last_heartbeat=row.last_heartbeat,
        port_range=(row.port_low, row.port_high),
        failed_gpus=tuple(row.failed_gpus),
        log_port=row.log_port,
        admin_state=None if row.admin_state is None else NodeState(row.admin_state),
        problems=tuple(str(p) for p in row.problems or ()),
        gpu_memory_mb=row.gpu_memory_mb,
    )
