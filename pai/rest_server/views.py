"""OpenPAI's response shapes (JobSummary, task attempts, nodes), rendered from domain values (pure); a job's detail
and attempts: ``pai.rest_server.job_views``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pai.domain.job import Job
from pai.domain.states import JobState
from pai.launcher.usage import NodeReport
from pai.store.records import JobEvent, TaskAttempt
from pai.store.summaries import JobSummary


def ms(t: float | None) -> int | None:
    return None if t is None else int(t * 1000)


def _execution_type(state: JobState) -> str:
    return "STOP" if state in (JobState.STOPPING, JobState.STOPPED) else "START"


def retry_details(retries: int, platform_retries: int) -> dict[str, int]:
    """OpenPAI's ``retryDetails``: retries counted against ``retryCount`` (user), requeues the platform caused."""
    return {"user": retries, "platform": platform_retries, "resource": 0}


def summary_view(summary: JobSummary) -> dict[str, Any]:
    """OpenPAI's JobSummary: an item of the job list."""
    return {
        "debugId": summary.id,
        "name": summary.name,
        "username": summary.user,
        "state": summary.state.value,
        "subState": summary.state.value,
        "executionType": _execution_type(summary.state),
        "tags": list(summary.tags),
        "retries": summary.retries + summary.platform_retries,
        "retryDetails": retry_details(summary.retries, summary.platform_retries),
        "retryDelayTime": 0,
        "submissionTime": ms(summary.submitted_at),
        "createdTime": ms(summary.submitted_at),
        "launchedTime": ms(summary.started_at),
        "completedTime": ms(summary.completed_at),
        "appExitCode": summary.exit_code,
        "virtualCluster": summary.vc,
        "jobPriority": summary.priority_class,
        "priority": summary.priority,
        "totalGpuNumber": summary.total_gpu,
        "totalTaskNumber": summary.task_count,
        "totalTaskRoleNumber": summary.role_count,
    }


def job_summary(job: Job, tags: Sequence[str] = ()) -> dict[str, Any]:
    return summary_view(JobSummary.of(job, tags))


def event_view(e: JobEvent) -> dict[str, Any]:
    return {"time": ms(e.at), "kind": e.kind, "message": e.message, "details": e.details or {}}


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


def node_view(report: NodeReport, shown: Callable[[str], bool] = lambda job: True) -> dict[str, Any]:
    """A node with its tasks; a task whose job ``shown`` refuses (another user's, where jobs are private) is only
    counted, in ``otherUsersTasks``."""
    node, used = report.node, report.used
    tasks = [t for t in report.tasks if shown(t.job)]
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
        "usedGpus": report.used_gpus,
        "tasks": [{"job": t.job, "role": t.role, "taskIndex": t.index, "state": t.state.value, "gpus": list(t.gpus)}
                  for t in tasks],
        "otherUsersTasks": len(report.tasks) - len(tasks),
    }
