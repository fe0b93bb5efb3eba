"""What-if: one scheduling pass over a scenario written as plain data (see docs/scheduling.md).

``simulate(scenario) -> {admitted: {job: {task: node}}, preempted: [job], waiting: {job: reason}, resized: [...]}``.
A job that will start once its victims have exited counts as admitted, with its planned placement. ``resized``:
the running elastic jobs that grow or shrink (``elastic`` of a job, as ``extras.elastic``), each
``{job, role, from, to, cause, message}`` with the tasks that start (``added``: task -> node) or stop (``removed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pai.domain.errors import InvalidParametersError
from pai.domain.resources import Resources
from pai.vc.config import ClusterConfig, parse_config, scheduler_config, vc_config
from pai.vc.elastic_doc import parse_elastic
from pai.vc.quota import cluster_total
from pai.vc.schedule import schedule
from pai.vc.snapshot import Admission, NodeView, PendingJob, Resize, RunningJob, Snapshot, TaskRequest


def simulate(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Run one pass over ``scenario`` (nodes, vcs, running, pending, optional now, scheduler, priorityClasses)."""
    snap = scenario_snapshot(scenario)
    d = schedule(snap)
    return {
        "admitted": {a.job: _tasks(a) for a in (*d.admissions, *d.planned.values())},
        "preempted": [p.victim for p in d.preemptions],
        "waiting": {k: r.to_dict() for k, r in d.waiting.items() if k not in d.planned},
        "resized": [_resize(z) for z in d.resizes],
    }


def scenario_snapshot(scenario: Mapping[str, Any]) -> Snapshot:
    """The Snapshot a scenario describes; raises InvalidParametersError naming the offending field."""
    try:
        return _snapshot(scenario)
    except (ValueError, TypeError, AttributeError) as e:  # a number or policy name that is not one
        raise InvalidParametersError(f"invalid scenario: {e}") from None


def _snapshot(scenario: Mapping[str, Any]) -> Snapshot:
    classes = parse_config({"priorityClasses": scenario.get("priorityClasses") or {}})
    running = tuple(_running(j, k, classes) for k, j in enumerate(_list(scenario, "running")))
    pending = tuple(_pending(j, k, classes) for k, j in enumerate(_list(scenario, "pending")))
    nodes = _nodes(_list(scenario, "nodes"), running)
    vcs = ClusterConfig(tuple(vc_config(v) for v in _list(scenario, "vcs"))).quotas(cluster_total(nodes))
    times = [j.started_at for j in running] + [j.submitted_at for j in pending]
    now = float(scenario.get("now", max(times, default=0.0)))
    return Snapshot(now=now, nodes=nodes, vcs=vcs, running=running, pending=pending,
                    config=scheduler_config(scenario.get("scheduler") or {}))


def _resize(z: Resize) -> dict[str, Any]:
    out: dict[str, Any] = {"job": z.job, "role": z.role, "from": z.size_from, "to": z.size_to,
                           "cause": z.cause.value, "message": z.message}
    if z.placements:
        out["added"] = {f"{p.role}-{p.index}": p.node for p in z.placements}
    if z.removed:
        out["removed"] = [f"{z.role}-{i}" for i in z.removed]
    return out


def _tasks(a: Admission) -> dict[str, str]:
    return {f"{p.role}-{p.index}": p.node for p in a.placements}


def _list(doc: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    value = doc.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise InvalidParametersError(f"{key}: expected a list of mappings", field=key)
    return value


def _need(d: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise InvalidParametersError(f"{where}: missing {key!r}", field=f"{where}.{key}")
    return d[key]


def _resources(d: Mapping[str, Any]) -> Resources:
    return Resources(int(d.get("gpu", 0)), int(d.get("cpu", 0)), int(d.get("memoryMB", 0)))


def _priority(value: Any, classes: ClusterConfig, where: str) -> int:
    if isinstance(value, bool) or value is None:
        raise InvalidParametersError(f"{where}.priority: expected an integer or a class name", field=where)
    return value if isinstance(value, int) else classes.priority(str(value))


def _task_requests(job: Mapping[str, Any], where: str) -> list[tuple[TaskRequest, Mapping[str, Any]]]:
    out: list[tuple[TaskRequest, Mapping[str, Any]]] = []
    counts: dict[str, int] = {}
    for t in _list(job, "tasks"):
        role = str(t.get("role", "main"))
        for _ in range(int(t.get("instances", 1))):
            index = counts.get(role, 0)
            counts[role] = index + 1
            selector = tuple(sorted((str(k), str(v)) for k, v in (t.get("nodeSelector") or {}).items()))
            out.append((TaskRequest(role, index, _resources(t), t.get("gpuType"), int(t.get("ports", 2)), selector), t))
    if not out:
        raise InvalidParametersError(f"{where}.tasks: a job needs at least one task", field=f"{where}.tasks")
    return out


def _running(j: Mapping[str, Any], k: int, classes: ClusterConfig) -> RunningJob:
    where = f"running[{k}]"
    tasks = tuple((t, str(_need(raw, "node", f"{where}.tasks"))) for t, raw in _task_requests(j, where))
    return RunningJob(key=str(_need(j, "name", where)), vc=str(j.get("vc", "default")), user=str(j.get("user", "")),
                      priority=_priority(j.get("priority", 10), classes, where),
                      started_at=float(j.get("startedAt", 0)), tasks=tasks,
                      preempting=bool(j.get("preempting", False)), preemptible=bool(j.get("preemptible", True)),
                      whole_nodes=bool(j.get("wholeNodes", False)),
                      expected_seconds=None if j.get("expectedSeconds") is None else float(j["expectedSeconds"]),
                      elastic=parse_elastic(j.get("elastic"), (t for t, _ in tasks), where),
                      last_resized_at=None if j.get("lastResizedAt") is None else float(j["lastResizedAt"]))


def _pending(j: Mapping[str, Any], k: int, classes: ClusterConfig) -> PendingJob:
    where = f"pending[{k}]"
    tasks = tuple(t for t, _ in _task_requests(j, where))
    return PendingJob(key=str(_need(j, "name", where)), vc=str(j.get("vc", "default")), user=str(j.get("user", "")),
                      priority=_priority(j.get("priority", 10), classes, where),
                      submitted_at=float(j.get("submittedAt", 0)), tasks=tasks,
                      whole_nodes=bool(j.get("wholeNodes", False)),
                      elastic=parse_elastic(j.get("elastic"), tasks, where))


def _nodes(raw: Sequence[Mapping[str, Any]], running: Sequence[RunningJob]) -> tuple[NodeView, ...]:
    used: dict[str, Resources] = {}
    for job in running:
        for t, node in job.tasks:
            used[node] = used.get(node, Resources()) + t.resources
    names = [str(_need(n, "name", f"nodes[{i}]")) for i, n in enumerate(raw)]
    unknown = sorted(set(used) - set(names))
    if unknown:
        raise InvalidParametersError(f"running tasks on unknown nodes: {', '.join(unknown)}", field="running")
    return tuple(NodeView(name=name, total=_resources(n), used=used.get(name, Resources()), gpu_type=n.get("gpuType"),
                          labels={str(k): str(v) for k, v in (n.get("labels") or {}).items()},
                          schedulable=bool(n.get("schedulable", True)), failed_gpus=int(n.get("failedGpus", 0)))
                 for name, n in zip(names, raw, strict=True))
