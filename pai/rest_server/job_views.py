"""OpenPAI's shapes for a job's detail, its attempts, a task's attempts and their log list (pure; rendered from
``queries.JobDetail`` and ``pai.launcher.job_attempts``).

A job attempt is one run of the whole job (``attemptId``); within it a task's attempts are numbered from 0
(the task's ``attemptId``), and ``containerId`` is our attempt id, which the log endpoints also accept.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pai.domain.job import Job, Task
from pai.domain.jobspec import TaskRoleSpec
from pai.launcher.exit_codes import classify
from pai.launcher.job_attempts import JobAttempt, job_attempts
from pai.launcher.queries import JobDetail
from pai.rest_server.views import event_view, job_summary, ms
from pai.store.records import TaskAttempt
from pai.store.summaries import role_size

TAIL_MODE_BYTES = 16_384  # what ``tail-mode=true`` asks of a log


def task_uid(job: Job, role: str, index: int) -> str:
    """A task's stable id across its attempts (OpenPAI's ``taskUid``)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pai:{job.id}/{role}/{index}"))


def log_list_path(job: Job, job_attempt: int, role: str, index: int, task_attempt: int) -> str:
    """Where a task attempt's log list is (OpenPAI's ``containerLog``)."""
    return (f"/api/v2/jobs/{quote(job.key)}/attempts/{job_attempt}/taskRoles/{quote(role)}/taskIndex/{index}"
            f"/attempts/{task_attempt}/logs")


def log_locations(job: Job, attempt: TaskAttempt, tail_mode: bool) -> dict[str, Any]:
    """OpenPAI's log list: where each of the attempt's logs is read (``GET`` with the same token)."""
    base = f"/api/v2/jobs/{quote(job.key)}/tasks/{quote(attempt.role)}/{attempt.index}/logs"
    tail = f"&tail={TAIL_MODE_BYTES}" if tail_mode else ""
    return {"locations": [{"name": stream, "uri": f"{base}/{stream}?attempt={attempt.attempt_id}{tail}"}
                          for stream in ("stdout", "stderr")]}


@dataclass(frozen=True, slots=True)
class _Seen:
    """A task attempt as shown: the task as it is now (the latest attempt) or its record (an earlier one)."""

    role: str
    index: int
    attempt_id: str | None
    state: str | None
    node: str | None
    address: str | None
    ports: dict[str, str]
    gpus: list[int] | None
    exit_code: int | None
    exit_reason: str | None
    created: float | None
    launched: float | None
    completed: float | None

    @classmethod
    def of(cls, row: TaskAttempt | None, task: Task | None) -> _Seen:
        created = None if row is None else row.started_at
        if task is not None:
            ports = {label: ",".join(str(p) for p in ps) for label, ps in task.ports.items()}
            return cls(task.role, task.index, task.attempt_id, task.state.value, task.node, task.address, ports,
                       list(task.gpus), task.exit_code, task.exit_reason, created, task.started_at, task.finished_at)
        assert row is not None
        return cls(row.role, row.index, row.attempt_id, row.state.value, row.node, None, {}, None, row.exit_code,
                   row.exit_reason, created, row.started_at, row.finished_at)


def _attempt_fields(job: Job, a: JobAttempt, n: int, seen: _Seen) -> dict[str, Any]:
    spec = None if seen.exit_code is None else classify(seen.exit_code)
    return {
        "attemptId": n,
        "attemptState": seen.state,
        "currentAttemptCreatedTime": ms(seen.created),
        "currentAttemptLaunchedTime": ms(seen.launched),
        "currentAttemptCompletedTime": ms(seen.completed),
        "containerId": seen.attempt_id,
        "containerIp": seen.address,
        "containerNodeName": seen.node,
        "containerPorts": seen.ports,
        "containerGpus": seen.gpus,
        "containerLog": log_list_path(job, a.index, seen.role, seen.index, n),
        "containerExitCode": seen.exit_code,
        "containerExitSpec": None if spec is None else spec.to_dict(),
        "containerExitDiagnostics": seen.exit_reason,
    }


def _number(rows: list[TaskAttempt], task: Task | None) -> int:
    """The task's current attempt number within the job attempt."""
    if task is not None and task.attempt_id is not None:
        for n, row in enumerate(rows):
            if row.attempt_id == task.attempt_id:
                return n
        return task.retries
    return max(len(rows) - 1, 0)


def task_status(job: Job, a: JobAttempt, role: str, index: int) -> dict[str, Any]:
    """A task in a job attempt (OpenPAI's task status in JobDetail)."""
    rows = a.task_attempts(role, index)
    task = _member(job, role, index) if a.latest else None
    n = _number(rows, task)
    if task is None and not rows:  # an earlier attempt that never placed this task
        seen = _Seen(role, index, None, None, None, None, {}, None, None, None, None, None, None)
    else:
        seen = _Seen.of(_row(rows, task) if task is not None else rows[-1], task)
    retries = task.retries if task is not None else max(len(rows) - 1, 0)
    return {
        "taskIndex": index,
        "taskUid": task_uid(job, role, index),
        "taskState": seen.state,
        **_attempt_fields(job, a, n, seen),
        "retries": retries,
        "accountableRetries": retries,
        "createdTime": ms(rows[0].started_at if rows else None),
        "launchedTime": ms(seen.launched),
        "completedTime": ms(seen.completed),
        "startedTime": ms(seen.launched),
    }


def _row(rows: list[TaskAttempt], task: Task) -> TaskAttempt | None:
    return next((r for r in rows if r.attempt_id == task.attempt_id), None)


def _member(job: Job, role: str, index: int) -> Task | None:
    """The job's task ``role[index]``; None when it is not one of its members (an elastic job's, not yet grown to
    it or shrunk below it)."""
    return next((t for t in job.tasks if t.role == role and t.index == index), None)


def _indices(job: Job, a: JobAttempt, role: TaskRoleSpec) -> list[int]:
    """The role's tasks in attempt ``a``: its instances, and an elastic role's members (the latest attempt) or the
    tasks that ran in it (an earlier one)."""
    if role.elastic is None or not role.elastic.resizable:
        return list(range(role.instances))
    if a.latest:
        return sorted(t.index for t in job.tasks if t.role == role.name)
    return sorted({i for r, i in a.tasks if r == role.name} | set(range(role.elastic.min_instances)))


def _totals(job: Job, a: JobAttempt) -> tuple[int, int]:
    """The attempt's tasks and GPUs: an elastic job's latest attempt counts its current size, not the size it asked
    first."""
    if not a.latest:
        return job.spec.instance_count, job.spec.total.gpu
    sizes = [(role_size(job, r), r.resources.gpu) for r in job.spec.task_roles]
    return sum(n for n, _ in sizes), sum(n * gpu for n, gpu in sizes)


def _roles(job: Job, a: JobAttempt) -> dict[str, Any]:
    roles: dict[str, Any] = {}
    for role in job.spec.task_roles:
        roles[role.name] = {
            "taskRoleStatus": {"name": role.name},
            "taskStatuses": [task_status(job, a, role.name, i) for i in _indices(job, a, role)],
        }
        if role.elastic is not None and role.elastic.resizable:
            roles[role.name]["elastic"] = {"minInstances": role.elastic.min_instances,
                                           "maxInstances": role.elastic.max_instances, "current": role_size(job, role)}
    return roles


def _exit_fields(job: Job, a: JobAttempt) -> dict[str, Any]:
    spec = None if a.exit_code is None else classify(a.exit_code)
    diagnostics = job.exit_reason if a.latest else (spec.reason if spec is not None and a.exit_code else None)
    t = a.trigger
    message = None if t is None else (f"{t.role}[{t.index}] exited {t.exit_code}"
                                      + (f" ({classify(t.exit_code).phrase})" if t.exit_code is not None else ""))
    return {
        "appExitCode": a.exit_code,
        "appExitSpec": None if spec is None else spec.to_dict(),
        "appExitDiagnostics": diagnostics,
        "appExitMessages": None if diagnostics is None else {"container": None, "runtime": None,
                                                             "launcher": diagnostics},
        "appExitTriggerMessage": message,
        "appExitTriggerTaskRoleName": None if t is None else t.role,
        "appExitTriggerTaskIndex": None if t is None else t.index,
        "appExitType": None if a.exit_code is None else ("Succeeded" if a.exit_code == 0 else "Failed"),
    }


def attempt_detail(found: JobDetail, a: JobAttempt) -> dict[str, Any]:
    """OpenPAI's JobDetail for job attempt ``a`` (the latest: ``GET /api/v2/jobs/{job}``)."""
    job = found.job
    status = job_summary(job, found.tags)
    for k in ("name", "totalGpuNumber", "totalTaskNumber", "totalTaskRoleNumber", "tags", "debugId", "jobPriority"):
        status.pop(k)
    status.update({
        "attemptId": a.index,
        "attemptState": a.state.value,
        "appId": job.id,
        "appProgress": 1 if a.state.is_terminal() or not a.latest else 0,
        "appTrackingUrl": "",
        "appCreatedTime": ms(a.started_at),
        "appLaunchedTime": ms(a.started_at),
        "appCompletedTime": ms(a.completed_at),
        **_exit_fields(job, a),
        "waitingReason": job.waiting_reason if a.latest else None,
    })
    return {
        "debugId": job.id,
        "name": job.name,
        "tags": list(found.tags),
        "jobPriority": job.spec.priority_class,
        "jobStatus": status,
        "taskRoles": _roles(job, a),
        "events": [event_view(e) for e in found.events],
        # a trial's job: its experiment (GET /api/v2/experiments/{experiment}) and trial number
        "experiment": None if found.trial is None else {
            "name": found.trial.experiment, "trialNumber": found.trial.number, "trialId": found.trial.trial_id},
    }


def job_detail(found: JobDetail) -> dict[str, Any]:
    """OpenPAI's JobDetail of the job as it is now (its latest attempt)."""
    return attempt_detail(found, job_attempts(found.job, found.attempts)[-1])


def job_attempt_view(found: JobDetail, a: JobAttempt) -> dict[str, Any]:
    """OpenPAI's job attempt (``/job-attempts``)."""
    job = found.job
    exits = _exit_fields(job, a)
    spec = exits["appExitSpec"]
    roles = _roles(job, a)
    tasks, gpus = _totals(job, a)
    brief = ("taskIndex", "taskState", "containerId", "containerIp", "containerGpus", "containerLog",
             "containerExitCode")
    for role in roles.values():
        role["taskStatuses"] = [{k: t[k] for k in brief} for t in role["taskStatuses"]]
    return {
        "jobName": job.name,
        "frameworkName": job.key,
        "uid": job.id,
        "userName": job.user,
        "state": a.state.value,
        "originState": a.state.value,
        "attemptIndex": a.index,
        "jobStartedTime": ms(job.submitted_at),
        "attemptStartedTime": ms(a.started_at),
        "attemptCompletedTime": ms(a.completed_at),
        "exitCode": a.exit_code,
        "exitPhrase": None if spec is None else spec["phrase"],
        "exitType": exits["appExitType"],
        "exitDiagnostics": exits["appExitMessages"],
        **{k: exits[k] for k in ("appExitTriggerMessage", "appExitTriggerTaskRoleName", "appExitTriggerTaskIndex",
                                 "appExitSpec", "appExitDiagnostics", "appExitMessages")},
        "totalGpuNumber": gpus,
        "totalTaskNumber": tasks,
        "totalTaskRoleNumber": len(job.spec.task_roles),
        "jobPriority": job.spec.priority_class,
        "taskRoles": roles,
        "isLatest": a.latest,
    }


def task_detail(found: JobDetail, a: JobAttempt, role: str, index: int) -> dict[str, Any]:
    """OpenPAI's task detail: the task in job attempt ``a`` with every attempt it made there, latest first."""
    job = found.job
    status = task_status(job, a, role, index)
    rows = a.task_attempts(role, index)
    task = _member(job, role, index) if a.latest else None
    current = _number(rows, task)
    attempts = [_attempt_fields(job, a, n, _Seen.of(row, task if n == current else None))
                for n, row in enumerate(rows)]
    if task is not None and task.attempt_id is not None and current >= len(rows):
        attempts.append(_attempt_fields(job, a, current, _Seen.of(None, task)))
    return {
        "username": job.user,
        "jobName": job.name,
        "jobAttemptId": a.index,
        "taskRoleName": role,
        **{k: status[k] for k in ("taskIndex", "taskUid", "taskState", "retries", "accountableRetries",
                                  "createdTime", "launchedTime", "completedTime")},
        "attempts": list(reversed(attempts)),
    }


def events_view(found: JobDetail, event_type: str | None) -> dict[str, Any]:
    """OpenPAI's event list (newest first; ``event_type``: only ``Normal`` or ``Warning`` ones), each event also in
    our shape (``time``, ``kind``, ``message``, ``details``)."""
    job = found.job
    data = []
    for e in reversed(found.events):
        kind = "Warning" if e.kind in WARNING_KINDS else "Normal"
        if event_type is not None and kind != event_type:
            continue
        details = e.details or {}
        data.append({
            "uid": f"{job.id}-{e.id}",
            "frameworkName": job.key,
            "taskroleName": details.get("role"),
            "taskIndex": details.get("index"),
            "type": kind,
            "reason": e.kind,
            "message": e.message,
            "firstTimestamp": ms(e.at),
            "lastTimestamp": ms(e.at),
            "count": 1,
            "sourceComponent": "pai-master",
            "sourceHost": None,
            **event_view(e),
        })
    return {"totalCount": len(data), "data": data}


WARNING_KINDS = frozenset({"warning", "failed", "preempted", "requeued", "retried", "task-retried"})
