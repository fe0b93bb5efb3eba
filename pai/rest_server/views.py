"""OpenPAI's response shapes (JobSummary, JobDetail, nodes), rendered from domain values (pure)."""

from __future__ import annotations

from typing import Any

from pai.domain.job import Job, Task
from pai.domain.node import Node
from pai.domain.resources import Resources
from pai.domain.states import JobState
from pai.launcher.exit_codes import classify
from pai.store.records import JobEvent, TaskAttempt
from pai.store.summaries import JobSummary


def ms(t: float | None) -> int | None:
    return None if t is None else int(t * 1000)


def _execution_type(state: JobState) -> str:
    return "STOP" if state in (JobState.STOPPING, JobState.STOPPED) else "START"


def summary_view(summary: JobSummary) -> dict[str, Any]:
    """OpenPAI's JobSummary: an item of the job list."""
    return {
        "name": summary.name,
        "username": summary.user,
        "state": summary.state.value,
        "subState": summary.state.value,
        "executionType": _execution_type(summary.state),
        "retries": summary.retries,
        "createdTime": ms(summary.submitted_at),
        "launchedTime": ms(summary.started_at),
        "completedTime": ms(summary.completed_at),
        "appExitCode": summary.exit_code,
        "virtualCluster": summary.vc,
        "priority": summary.priority,
        "totalGpuNumber": summary.total_gpu,
        "totalTaskNumber": summary.task_count,
        "totalTaskRoleNumber": summary.role_count,
    }


def job_summary(job: Job) -> dict[str, Any]:
    return summary_view(JobSummary.of(job))


def _task_status(task: Task) -> dict[str, Any]:
    return {
        "taskIndex": task.index,
        "taskState": task.state.value,
        "containerId": task.attempt_id,
        "containerIp": task.address,
        "containerNodeName": task.node,
        "containerPorts": {label: ",".join(str(p) for p in ports) for label, ports in task.ports.items()},
        "containerGpus": list(task.gpus),
        "containerExitCode": task.exit_code,
        "containerExitSpec": None if task.exit_code is None else classify(task.exit_code).to_dict(),
        "containerExitDiagnostics": task.exit_reason,
        "retries": task.retries,
        "startedTime": ms(task.started_at),
        "completedTime": ms(task.finished_at),
    }


def event_view(e: JobEvent) -> dict[str, Any]:
    return {"time": ms(e.at), "kind": e.kind, "message": e.message, "details": e.details or {}}


def job_detail(job: Job, events: list[JobEvent]) -> dict[str, Any]:
    status = job_summary(job)
    status.update(
        {
            "appExitSpec": None if job.exit_code is None else classify(job.exit_code).to_dict(),
            "appExitDiagnostics": job.exit_reason,
            "waitingReason": job.waiting_reason,
        }
    )
    for k in ("name", "totalGpuNumber", "totalTaskNumber", "totalTaskRoleNumber"):
        status.pop(k)
    roles: dict[str, Any] = {}
    for role in job.spec.task_roles:
        tasks = sorted((t for t in job.tasks if t.role == role.name), key=lambda t: t.index)
        roles[role.name] = {
            "taskRoleStatus": {"name": role.name},
            "taskStatuses": [_task_status(t) for t in tasks],
        }
    return {"name": job.name, "jobStatus": status, "taskRoles": roles, "events": [event_view(e) for e in events]}


def attempt_view(a: TaskAttempt) -> dict[str, Any]:
    return {
        "attemptId": a.attempt_id,
        "role": a.role,
        "taskIndex": a.index,
        "jobAttempt": a.job_attempt,
        "node": a.node,
        "state": a.state.value,
        "exitCode": a.exit_code,
        "exitReason": a.exit_reason,
        "startedTime": ms(a.started_at),
        "completedTime": ms(a.finished_at),
    }


def node_view(node: Node, used: Resources) -> dict[str, Any]:
    return {
        "name": node.name,
        "address": node.address,
        "state": node.state.value,
        "lastHeartbeat": ms(node.last_heartbeat),
        "gpuType": node.gpu_type,
        "gpuMemoryMB": node.gpu_memory_mb,
        "labels": dict(node.labels),
        "failedGpus": list(node.failed_gpus),
        "healthy": not node.problems and not node.failed_gpus,
        "problems": list(node.problems),
        "total": node.total.to_dict(),
        "used": used.to_dict(),
    }
