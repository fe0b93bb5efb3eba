"""What a job asks that no node of the cluster as it stands could ever hold: the warnings of its submission.

OpenPAI accepts such a job (it waits, its waiting reason ``NeverFits``); pai accepts it too and says so at once, in
the submission's ``warnings`` and the job's history. The rule, the one place it is stated: each role's demand per
instance against the nodes' capacities, every registered node counted whatever its state (a cordoned or lost node
may come back), less its failed GPUs, among the nodes of the role's GPU type and labels.

* a role no node matches (its GPU type, its node selector);
* a resource (GPUs, CPUs, memory) one instance asks more of than the largest node has, each named with the node;
* all of them at once: each resource fits some node, but no node has them together;
* a gang (every task placed at once; ``extras.wholeNodes``: a node each): a role whose instances the matching
  nodes cannot hold together, or a job that asks more of a resource, or more whole nodes, than the cluster has.

No nodes at all (a cluster whose agents have not registered yet): nothing to compare with, no warning.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from pai.domain.jobspec import JobSpec, SpecWarning, TaskRoleSpec
from pai.domain.resources import Resources

# (attribute of Resources, v2 field, v1 field, the unit as a message says it)
_KINDS = (("gpu", "gpu", "gpuNumber", "GPU"), ("cpu", "cpu", "cpuNumber", "CPU"),
          ("memory_mb", "memoryMB", "memoryMB", "MB of memory"))


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    """A node as this rule sees it: what a task could ever be given there."""

    name: str
    total: Resources  # less its failed GPUs
    gpu_type: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


def never_fits(spec: JobSpec, nodes: Sequence[NodeCapacity]) -> tuple[SpecWarning, ...]:
    """The warnings, in the spec's role order, then the gang's as a whole."""
    if not nodes:
        return ()
    found: list[SpecWarning] = []
    for index, role in enumerate(spec.task_roles):
        found += _role(spec, index, role, nodes)
    if spec.gang and not found:
        found += _gang_total(spec, nodes)
    return tuple(found)


def _path(spec: JobSpec, index: int, role: TaskRoleSpec) -> str:
    return f"taskRoles[{index}]" if spec.protocol_version == 1 else f"taskRoles.{role.name}"


def _field(spec: JobSpec, index: int, role: TaskRoleSpec, v2: str, v1: str) -> str:
    path = _path(spec, index, role)
    return f"{path}.{v1}" if spec.protocol_version == 1 else f"{path}.resourcePerInstance.{v2}"


def _qualifier(gpu_type: str | None, selector: Mapping[str, str]) -> str:
    text = f" of type {gpu_type}" if gpu_type else ""
    if selector:
        text += " labelled " + ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    return text


def _amount(n: int, unit: str) -> str:
    return f"{n} {unit}{'s' if n != 1 and unit in ('GPU', 'CPU') else ''}"


def _role(spec: JobSpec, index: int, role: TaskRoleSpec, nodes: Sequence[NodeCapacity]) -> Iterator[SpecWarning]:
    gpu_type = role.gpu_type or spec.gpu_type
    selector = role.node_selector
    matching = sorted((n for n in nodes if (gpu_type is None or n.gpu_type == gpu_type)
                       and all(n.labels.get(k) == v for k, v in selector.items())), key=lambda n: n.name)
    qualifier = _qualifier(gpu_type, selector)
    if not matching:
        yield SpecWarning(_path(spec, index, role),
                          f"asks a node{qualifier}; none of the cluster's {len(nodes)} nodes is one")
        return
    need = role.resources
    short = False
    for attr, v2, v1, unit in _KINDS:
        want = getattr(need, attr)
        largest = _largest(matching, attr)
        have = getattr(largest.total, attr)
        if want > have:
            short = True
            yield SpecWarning(_field(spec, index, role, v2, v1),
                              f"asks {_amount(want, unit)} per instance; the largest node{qualifier}, "
                              f"{largest.name}, has {have}")
    if short:
        return
    if not any(need.fits_in(n.total) for n in matching):
        most = max(matching, key=lambda n: (n.total.gpu, n.total.cpu, n.total.memory_mb))
        where = _path(spec, index, role) + ("" if spec.protocol_version == 1 else ".resourcePerInstance")
        yield SpecWarning(where,
                          f"asks {_all(need)} per instance; no node{qualifier} has them all (the one with the most "
                          f"GPUs, {most.name}, has {_all(most.total)})")
        return
    if spec.gang and role.instances > 1:
        room = sum(_per_node(need, n.total, spec.whole_nodes) for n in matching)
        if room < role.instances:
            where = _path(spec, index, role) + (".taskNumber" if spec.protocol_version == 1 else ".instances")
            yield SpecWarning(where, f"asks {role.instances} instances at once (a gang); the nodes{qualifier} can hold "
                              f"{room} of them")


def _largest(nodes: Sequence[NodeCapacity], attr: str) -> NodeCapacity:
    """The node with the most of ``attr``; of equals, the first (``nodes`` are in name order)."""
    return max(nodes, key=lambda n: int(getattr(n.total, attr)))


def _all(r: Resources) -> str:
    return f"{_amount(r.gpu, 'GPU')}, {_amount(r.cpu, 'CPU')} and {r.memory_mb} MB"


def _per_node(need: Resources, total: Resources, whole: bool) -> int:
    """How many instances of ``need`` one node of ``total`` holds at once."""
    counts = [getattr(total, attr) // getattr(need, attr) for attr, *_ in _KINDS if getattr(need, attr) > 0]
    most = min(counts) if counts else 1 << 30
    return min(most, 1) if whole else most


def _gang_total(spec: JobSpec, nodes: Sequence[NodeCapacity]) -> Iterator[SpecWarning]:
    cluster = Resources()
    for n in nodes:
        cluster = cluster + n.total
    asked = spec.total
    for attr, _, _, unit in _KINDS:
        want, have = getattr(asked, attr), getattr(cluster, attr)
        if want > have:
            yield SpecWarning("taskRoles", f"asks {_amount(want, unit)} at once in all (a gang); the whole cluster "
                                           f"has {have}")
    if spec.whole_nodes and spec.instance_count > len(nodes):
        yield SpecWarning("extras.wholeNodes", f"asks {spec.instance_count} whole nodes at once (a gang); the "
                                               f"cluster has {len(nodes)}")
