"""A workload trace for ``pai vc replay``: the cluster's nodes and the jobs that arrive, as JSON Lines.

The first line may be a header, ``{"trace": 1, "nodes": [...], ...}``; every other line is one job::

    {"name": "j1", "submittedAt": 30, "duration": 3600, "vc": "research", "user": "alice", "priority": "prod",
     "tasks": [{"instances": 2, "gpu": 8, "cpu": 48, "memoryMB": 384000}]}

``preemptible: false`` marks a job no rule may preempt once it runs (``extras.preemptible`` of a job spec);
``elastic: {"main": {"minInstances": 1, "maxInstances": 4}}`` an elastic job (``extras.elastic``, pai.vc.elastic_doc):
its ``duration`` is then its run time at the size it asks (its ``tasks``); the replay runs it faster or slower at
other sizes.

Times are seconds from the start of the trace. A node is ``{name, gpu, cpu, memoryMB}`` with optional
``gpuType``, ``labels``, ``schedulable``, ``failedGpus`` and ``count`` (``count: 125`` stands for nodes
``<name>-1`` to ``<name>-125``). Blank lines and lines starting with ``#`` are skipped. Pure: lines in, values out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pai.domain.errors import InvalidParametersError
from pai.domain.resources import Resources
from pai.vc.elastic_doc import elastic_doc, parse_elastic
from pai.vc.snapshot import ElasticRole, NodeView, TaskRequest

TRACE_VERSION = 1


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a workload: when it arrives, where, and how long it runs once started (a restart after a
    preemption runs the whole ``duration`` again). ``priority`` is a number or a class name of the configuration."""

    name: str
    submitted_at: float
    duration: float
    tasks: tuple[TaskRequest, ...]
    vc: str = "default"
    user: str = ""
    priority: int | str = 10
    preemptible: bool = True
    elastic: tuple[ElasticRole, ...] = ()  # ``tasks`` is the size it asks; ``duration`` its run time at that size

    @property
    def gpus(self) -> int:
        return sum(t.resources.gpu for t in self.tasks)


@dataclass(frozen=True, slots=True)
class Trace:
    jobs: tuple[TraceJob, ...]
    nodes: tuple[NodeView, ...] = ()  # from the header; a configuration or the live cluster may bring its own
    header: Mapping[str, Any] = field(default_factory=dict)  # the header as written (generator settings...)


def parse_trace(lines: Iterable[str]) -> Trace:
    """Read a trace; raises InvalidParametersError naming the line and the field."""
    jobs: list[TraceJob] = []
    header: dict[str, Any] = {}
    nodes: tuple[NodeView, ...] = ()
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"line {number}"
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise InvalidParametersError(f"{where}: not JSON: {e}", field=where) from None
        if not isinstance(doc, dict):
            raise InvalidParametersError(f"{where}: expected a JSON object", field=where)
        if "trace" in doc:
            if jobs or header:
                raise InvalidParametersError(f"{where}: the header must be the first line", field=where)
            header = doc
            nodes = parse_nodes(doc.get("nodes") or [], f"{where}: nodes")
            continue
        job = _job(doc, where)
        if job.name in seen:
            raise InvalidParametersError(f"{where}: job {job.name!r} is listed twice", field=f"{where}.name")
        seen.add(job.name)
        jobs.append(job)
    return Trace(tuple(sorted(jobs, key=lambda j: (j.submitted_at, j.name))), nodes, header)


def trace_lines(trace: Trace) -> Iterator[str]:
    """The trace as JSON Lines (header first), the form ``parse_trace`` reads."""
    head = {"trace": TRACE_VERSION, **{k: v for k, v in trace.header.items() if k != "trace"}}
    head["nodes"] = node_docs(trace.nodes)
    yield json.dumps(head, sort_keys=True)
    for j in trace.jobs:
        doc = {"name": j.name, "submittedAt": j.submitted_at, "duration": j.duration, "vc": j.vc, "user": j.user,
               "priority": j.priority, "tasks": task_docs(j.tasks)}
        if not j.preemptible:
            doc["preemptible"] = False
        if j.elastic:
            doc["elastic"] = elastic_doc(j.elastic)
        yield json.dumps(doc)


def task_docs(tasks: Sequence[TaskRequest]) -> list[dict[str, Any]]:
    """Tasks grouped back into ``{role, instances, gpu, cpu, memoryMB}`` entries (consecutive equal tasks)."""
    out: list[dict[str, Any]] = []
    for t in tasks:
        doc: dict[str, Any] = {"gpu": t.resources.gpu, "cpu": t.resources.cpu, "memoryMB": t.resources.memory_mb}
        if t.role != "main":
            doc["role"] = t.role
        if t.gpu_type:
            doc["gpuType"] = t.gpu_type
        if out and {k: v for k, v in out[-1].items() if k != "instances"} == doc:
            out[-1]["instances"] += 1
        else:
            out.append({**doc, "instances": 1})
    return out


def node_docs(nodes: Sequence[NodeView]) -> list[dict[str, Any]]:
    """Nodes as written; a run of equal nodes named ``<name>-1`` .. ``<name>-N`` is written once with ``count``."""
    out: list[dict[str, Any]] = []
    run = 0  # how many nodes the last entry stands for, when it is such a run
    for n in nodes:
        doc = node_doc(n)
        prefix, _, number = n.name.rpartition("-")
        last = out[-1] if out else None
        if (last is not None and run and number == str(run + 1) and last["name"] == prefix
                and {**last, "count": 0} == {**doc, "name": prefix, "count": 0}):
            run += 1
            last["count"] = run
        elif number == "1" and prefix:
            run = 1
            out.append({**doc, "name": prefix, "count": 1})
        else:
            run = 0
            out.append(doc)
    return out


def node_doc(n: NodeView) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": n.name, "gpu": n.total.gpu, "cpu": n.total.cpu, "memoryMB": n.total.memory_mb}
    if n.gpu_type:
        doc["gpuType"] = n.gpu_type
    if n.labels:
        doc["labels"] = dict(n.labels)
    if not n.schedulable:
        doc["schedulable"] = False
    if n.failed_gpus:
        doc["failedGpus"] = n.failed_gpus
    return doc


def parse_nodes(raw: Any, where: str) -> tuple[NodeView, ...]:
    """Nodes as written in a trace header or a configuration's ``nodes`` (with ``count`` expanded)."""
    if not isinstance(raw, list):
        raise InvalidParametersError(f"{where}: expected a list of nodes", field=where)
    out: list[NodeView] = []
    for i, n in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(n, dict) or not isinstance(n.get("name"), str) or not n["name"]:
            raise InvalidParametersError(f"{at}: a node needs a name", field=f"{at}.name")
        count = _count(n, "count", at, default=0)
        names = [n["name"]] if not count else [f"{n['name']}-{k}" for k in range(1, count + 1)]
        labels = n.get("labels") or {}
        if not isinstance(labels, dict):
            raise InvalidParametersError(f"{at}.labels: expected a mapping", field=f"{at}.labels")
        for name in names:
            out.append(NodeView(name=name, total=_resources(n, at), gpu_type=n.get("gpuType"),
                                labels={str(k): str(v) for k, v in labels.items()},
                                schedulable=bool(n.get("schedulable", True)),
                                failed_gpus=_count(n, "failedGpus", at)))
    names_seen = [n.name for n in out]
    if len(set(names_seen)) != len(names_seen):
        raise InvalidParametersError(f"{where}: node names repeat", field=where)
    return tuple(out)


def _job(doc: Mapping[str, Any], where: str) -> TraceJob:
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidParametersError(f"{where}: name: a job needs a name", field=f"{where}.name")
    priority = doc.get("priority", 10)
    if isinstance(priority, bool) or not isinstance(priority, int | str):
        raise InvalidParametersError(f"{where}: priority: expected an integer or a class name",
                                     field=f"{where}.priority")
    preemptible = doc.get("preemptible", True)
    if not isinstance(preemptible, bool):
        raise InvalidParametersError(f"{where}: preemptible: expected true or false", field=f"{where}.preemptible")
    raw_tasks = doc.get("tasks")
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise InvalidParametersError(f"{where}: tasks: a job needs at least one task", field=f"{where}.tasks")
    tasks: list[TaskRequest] = []
    counts: dict[str, int] = {}
    for k, t in enumerate(raw_tasks):
        at = f"{where}: tasks[{k}]"
        if not isinstance(t, dict):
            raise InvalidParametersError(f"{at}: expected a mapping", field=at)
        role = str(t.get("role", "main"))
        for _ in range(_count(t, "instances", at, default=1)):
            index = counts.get(role, 0)
            counts[role] = index + 1
            tasks.append(TaskRequest(role, index, _resources(t, at), t.get("gpuType"), _count(t, "ports", at, 2)))
    if not tasks:
        raise InvalidParametersError(f"{where}: tasks: a job needs at least one task", field=f"{where}.tasks")
    return TraceJob(name=name, submitted_at=_seconds(doc, "submittedAt", where, 0.0),
                    duration=_seconds(doc, "duration", where, None), tasks=tuple(tasks),
                    vc=str(doc.get("vc", "default")), user=str(doc.get("user", "")), priority=priority,
                    preemptible=preemptible, elastic=parse_elastic(doc.get("elastic"), tasks, where))


def _seconds(doc: Mapping[str, Any], key: str, where: str, default: float | None) -> float:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        rule = "is required" if value is None else "expected a number of seconds, at least 0"
        raise InvalidParametersError(f"{where}: {key}: {rule}", field=f"{where}.{key}")
    return float(value)


def _count(doc: Mapping[str, Any], key: str, where: str, default: int = 0) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidParametersError(f"{where}.{key}: expected an integer, at least 0", field=f"{where}.{key}")
    return value


def _resources(doc: Mapping[str, Any], where: str) -> Resources:
    return Resources(_count(doc, "gpu", where), _count(doc, "cpu", where), _count(doc, "memoryMB", where))
