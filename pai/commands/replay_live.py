"""``pai vc replay --from-master``: the live cluster as a replay starts from it, read over the master's REST API.

Nodes come from ``GET /api/v2/nodes``, the VCs from ``GET /api/v2/virtual-clusters`` (each VC's configuration as
the master holds it), active jobs (``JobState.is_active``) from ``GET /api/v2/jobs?state=WAITING,RUNNING,STOPPING``,
where each runs from its detail (``containerNodeName`` of every task) and what each task needs from its ``/config``
(normalized as the master does). Times become seconds relative to ``now`` (the replay's start). The master does not
know how long a job will run: each running job is given ``live_duration`` more seconds, each waiting (or preempted)
one ``live_duration`` once started.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pai.cli.api import JobFilters, MasterApi
from pai.domain.errors import InvalidParametersError, PaiError
from pai.domain.jobspec import PRIORITY_CLASSES, JobSpec
from pai.domain.limits import JobLimits
from pai.domain.resources import Resources
from pai.domain.states import JobState, TaskState
from pai.jobspec.parse import parse_job
from pai.vc.config import ClusterConfig, vc_config
from pai.vc.replay import LiveJob
from pai.vc.snapshot import NodeView, RunningJob, TaskRequest
from pai.vc.trace import TraceJob

ACTIVE = ",".join(s.value for s in JobState if s.is_active())
HOLDING = frozenset(s.value for s in TaskState if s.holds_node())
NO_LIMITS = JobLimits(tasks_per_role=10**6, tasks_per_job=10**7)


@dataclass(frozen=True, slots=True)
class LiveCluster:
    nodes: tuple[NodeView, ...]
    config: ClusterConfig  # the master's VCs (its scheduler settings are not served: defaults)
    running: tuple[LiveJob, ...]
    waiting: tuple[TraceJob, ...]


def read_live(api: MasterApi, now: float, live_duration: float) -> LiveCluster:
    nodes = tuple(_node(n) for n in api.nodes())
    specs = [v.get("config") or {"name": name} for name, v in api.virtual_clusters().items()]
    config = ClusterConfig(tuple(vc_config(s) for s in specs))
    running: list[LiveJob] = []
    waiting: list[TraceJob] = []
    summaries = api.list_jobs(JobFilters(state=ACTIVE, limit=50_000, order="submissionTime,ASC"))
    for s in summaries:
        key = f"{s['username']}~{s['name']}"
        spec = _spec(api, key, s)
        submitted = _seconds(s.get("submissionTime"), now)
        tasks = _requests(spec)
        if s["state"] == "WAITING":
            waiting.append(TraceJob(key, submitted, live_duration, tuple(tasks.values()), s["virtualCluster"],
                                    s["username"], int(s["priority"]), preemptible=spec.preemptible))
            continue
        placed = _placed(api.job(key), tasks)
        if not placed:
            continue
        started = _seconds(s.get("launchedTime") or s.get("submissionTime"), now)
        job = RunningJob(key=key, vc=s["virtualCluster"], user=s["username"], priority=int(s["priority"]),
                         started_at=started, tasks=placed, preempting=s["state"] == "STOPPING",
                         preemptible=spec.preemptible)
        running.append(LiveJob(job, submitted, live_duration, live_duration, stopping=job.preempting))
    return LiveCluster(nodes, config, tuple(running), tuple(waiting))


def _node(n: Mapping[str, Any]) -> NodeView:
    return NodeView(name=str(n["name"]), total=Resources.from_dict(n.get("total") or {}), gpu_type=n.get("gpuType"),
                    labels={str(k): str(v) for k, v in (n.get("labels") or {}).items()},
                    schedulable=n.get("state") == "READY" and not n.get("problems"),
                    failed_gpus=len(n.get("failedGpus") or []))


def _seconds(ms: Any, now: float) -> float:
    return (float(ms) / 1000 if ms is not None else now) - now


def _spec(api: MasterApi, key: str, summary: Mapping[str, Any]) -> JobSpec:
    """The job's spec, normalized from its stored configuration as the master did on submission."""
    classes = dict(PRIORITY_CLASSES)
    if isinstance(summary.get("jobPriority"), str):
        classes.setdefault(summary["jobPriority"], int(summary["priority"]))
    try:
        return parse_job(api.job_config(key), None, classes, NO_LIMITS).spec
    except PaiError as e:
        raise InvalidParametersError(f"job {key}: its configuration cannot be read: {e.message}") from None


def _requests(spec: JobSpec) -> dict[tuple[str, int], TaskRequest]:
    """Every task as the launcher hands it to the scheduler (pai.launcher.snapshot), by (role, index)."""
    out: dict[tuple[str, int], TaskRequest] = {}
    for role in spec.task_roles:
        for i in range(role.instances):
            out[(role.name, i)] = TaskRequest(role.name, i, role.resources, role.gpu_type or spec.gpu_type,
                                              sum(p.count for p in role.all_ports()),
                                              tuple(sorted(role.node_selector.items())))
    return out


def _placed(detail: Mapping[str, Any], tasks: Mapping[tuple[str, int], TaskRequest]
            ) -> tuple[tuple[TaskRequest, str], ...]:
    """The tasks that hold resources on a node now (placed, ``TaskState.holds_node``), with the node."""
    out: list[tuple[TaskRequest, str]] = []
    for role, body in (detail.get("taskRoles") or {}).items():
        for status in body.get("taskStatuses") or []:
            node, request = status.get("containerNodeName"), tasks.get((role, int(status.get("taskIndex", 0))))
            if node and request is not None and status.get("taskState") in HOLDING:
                out.append((request, str(node)))
    return tuple(out)
