"""What no node of the cluster could ever hold (pai.domain.neverfits): named cases, each a spec against nodes and
the warnings it gets, field and message."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.neverfits import NodeCapacity, never_fits
from pai.domain.resources import Resources


def node(name: str, gpu: int, cpu: int = 32, memory_mb: int = 65536, gpu_type: str | None = None,
         **labels: str) -> NodeCapacity:
    return NodeCapacity(name, Resources(gpu, cpu, memory_mb), gpu_type, labels)


def role(name: str = "worker", gpu: int = 0, cpu: int = 1, memory_mb: int = 1024, instances: int = 1,
         gpu_type: str | None = None, **selector: str) -> TaskRoleSpec:
    return TaskRoleSpec(name, instances, "true", Resources(gpu, cpu, memory_mb), gpu_type=gpu_type,
                        node_selector=dict(selector))


def spec(*roles: TaskRoleSpec, version: int = 2, gang: bool = True, whole_nodes: bool = False) -> JobSpec:
    return JobSpec("j", roles, protocol_version=version, gang=gang, whole_nodes=whole_nodes)


@dataclass(frozen=True)
class Case:
    name: str
    spec: JobSpec
    nodes: list[NodeCapacity]
    warnings: list[tuple[str, str]]  # (field, message)


CPU_ONLY = [node("n1", 0, 16, 65536), node("n2", 0, 64, 32768)]
GPUS = [node("g1", 4, 32, 131072, "V100"), node("g2", 8, 64, 262144, "A100", zone="b"), node("c1", 0, 96, 524288)]

CASES = [
    Case("fits: no warning", spec(role(gpu=0, cpu=8)), CPU_ONLY, []),
    Case("no nodes registered yet: nothing to compare with", spec(role(gpu=64)), [], []),
    Case("GPUs on a cluster without any", spec(role(gpu=64)), CPU_ONLY,
         [("taskRoles.worker.resourcePerInstance.gpu", "asks 64 GPUs per instance; the largest node, n1, has 0")]),
    Case("CPUs: the largest node named", spec(role(cpu=65)), CPU_ONLY,
         [("taskRoles.worker.resourcePerInstance.cpu", "asks 65 CPUs per instance; the largest node, n2, has 64")]),
    Case("memory", spec(role(memory_mb=70000)), CPU_ONLY,
         [("taskRoles.worker.resourcePerInstance.memoryMB",
           "asks 70000 MB of memory per instance; the largest node, n1, has 65536")]),
    Case("each short resource its own warning", spec(role(gpu=1, cpu=100)), CPU_ONLY,
         [("taskRoles.worker.resourcePerInstance.gpu", "asks 1 GPU per instance; the largest node, n1, has 0"),
          ("taskRoles.worker.resourcePerInstance.cpu", "asks 100 CPUs per instance; the largest node, n2, has 64")]),
    Case("v1 names its own fields", spec(role("w", gpu=2), version=1), CPU_ONLY,
         [("taskRoles[0].gpuNumber", "asks 2 GPUs per instance; the largest node, n1, has 0")]),
    Case("only the role that cannot fit", spec(role("ps", cpu=2), role("worker", cpu=128)), CPU_ONLY,
         [("taskRoles.worker.resourcePerInstance.cpu", "asks 128 CPUs per instance; the largest node, n2, has 64")]),
    Case("each resource fits some node, none has them all", spec(role(cpu=60, memory_mb=60000)), CPU_ONLY,
         [("taskRoles.worker.resourcePerInstance",
           "asks 0 GPUs, 60 CPUs and 60000 MB per instance; no node has them all (the one with the most GPUs, n2, "
           "has 0 GPUs, 64 CPUs and 32768 MB)")]),
    Case("failed GPUs are not counted (the store's capacity is less them)", spec(role(gpu=4)),
         [node("n1", 3)],
         [("taskRoles.worker.resourcePerInstance.gpu", "asks 4 GPUs per instance; the largest node, n1, has 3")]),
    Case("a GPU type: only its nodes", spec(role(gpu=8, gpu_type="V100")), GPUS,
         [("taskRoles.worker.resourcePerInstance.gpu",
           "asks 8 GPUs per instance; the largest node of type V100, g1, has 4")]),
    Case("the job's GPU type applies to its roles", replace(spec(role(gpu=8)), gpu_type="V100"), GPUS,
         [("taskRoles.worker.resourcePerInstance.gpu",
           "asks 8 GPUs per instance; the largest node of type V100, g1, has 4")]),
    Case("a type no node is", spec(role(gpu=1, gpu_type="H100")), GPUS,
         [("taskRoles.worker", "asks a node of type H100; none of the cluster's 3 nodes is one")]),
    Case("labels no node carries", spec(role(zone="c")), GPUS,
         [("taskRoles.worker", "asks a node labelled zone=c; none of the cluster's 3 nodes is one")]),
    Case("labels some node carries", spec(role(gpu=8, zone="b")), GPUS, []),
    Case("a gang whose instances the nodes cannot hold together", spec(role(gpu=4, instances=4)), GPUS,
         [("taskRoles.worker.instances", "asks 4 instances at once (a gang); the nodes can hold 3 of them")]),
    Case("not a gang: placed one by one, any count", spec(role(gpu=4, instances=4), gang=False), GPUS, []),
    Case("v1's instance count", spec(role(gpu=4, instances=4), version=1), GPUS,
         [("taskRoles[0].taskNumber", "asks 4 instances at once (a gang); the nodes can hold 3 of them")]),
    Case("whole nodes: a node each", spec(role(cpu=1, instances=4), whole_nodes=True), GPUS,
         [("taskRoles.worker.instances", "asks 4 instances at once (a gang); the nodes can hold 3 of them")]),
    Case("a gang of roles that fit alone and not together", spec(role("a", gpu=8), role("b", gpu=8)),
         [node("g1", 8), node("g2", 4), node("g3", 3)],
         [("taskRoles", "asks 16 GPUs at once in all (a gang); the whole cluster has 15")]),
    Case("whole nodes across roles", spec(role("a"), role("b"), role("c"), role("d"), whole_nodes=True), GPUS,
         [("extras.wholeNodes", "asks 4 whole nodes at once (a gang); the cluster has 3")]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_never_fits(case: Case) -> None:
    assert [(w.field, w.message) for w in never_fits(case.spec, case.nodes)] == case.warnings
