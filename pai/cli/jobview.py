"""Job summaries and details as text for people (pure functions of the master's JSON)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pai.cli.output import MISSING, cell, format_time, render_table
from pai.domain import JobState

JOB_HEADERS = ("NAME", "STATE", "VC", "RETRIES", "GPU", "TASKS", "SUBMITTED", "COMPLETED")
TASK_HEADERS = ("ROLE", "INDEX", "STATE", "NODE", "IP", "PORTS", "EXIT", "RETRIES")
EVENT_HEADERS = ("TIME", "KIND", "MESSAGE")
PROXY_HEADERS = ("TASK", "PORT", "URL")
_FINISHED = frozenset(s.value for s in JobState if s.is_terminal())


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def job_items(answer: Any) -> list[dict[str, Any]]:
    """The JobSummary list of ``GET /api/v2/jobs``, with or without ``withTotalCount``."""
    items = answer.get("data") if isinstance(answer, dict) else answer
    return [item for item in _list(items) if isinstance(item, dict)]


def render_job_list(answer: Any) -> str:
    rows = [
        (
            f"{job.get('username')}~{job.get('name')}" if job.get("username") else job.get("name"),
            job.get("state"),
            job.get("virtualCluster"),
            job.get("retries"),
            job.get("totalGpuNumber"),
            job.get("totalTaskNumber"),
            format_time(job.get("createdTime")),
            format_time(job.get("completedTime")),
        )
        for job in job_items(answer)
    ]
    table = render_table(JOB_HEADERS, rows)
    total = answer.get("totalCount") if isinstance(answer, dict) else None
    if isinstance(total, int) and total > len(rows):
        table += f"\n({len(rows)} of {total} jobs; use --limit to see more)"
    return table


def job_state(detail: dict[str, Any]) -> str:
    return str(_dict(detail.get("jobStatus")).get("state") or "UNKNOWN")


def format_exit(code: object, spec: object) -> str:
    """``1 (user, permanent: reason)`` from an exit code and an exit spec ``{code, type, retry, reason}``."""
    spec = _dict(spec)
    kinds = ", ".join(str(spec[k]) for k in ("type", "retry") if spec.get(k))
    reason = spec.get("reason")
    inner = f"{kinds}: {reason}" if kinds and reason else (kinds or reason or "")
    if code is None and not inner:
        return MISSING
    return f"{cell(code)} ({inner})" if inner else cell(code)


def format_waiting(status: dict[str, Any]) -> str | None:
    """``<message> (position 2 in VC default)``, or None when the job is not waiting for anything."""
    reason = _dict(status.get("waitingReason"))
    if not reason or status.get("state") in _FINISHED:
        return None
    message = str(reason.get("message") or reason.get("code") or "waiting")
    position = reason.get("position")
    if position is None:
        return message
    return f"{message} (position {position} in VC {status.get('virtualCluster') or 'default'})"


def format_ports(ports: object) -> str:
    return " ".join(f"{label}:{value}" for label, value in _dict(ports).items()) or MISSING


def render_progress(key: str, detail: dict[str, Any]) -> str:
    waiting = format_waiting(_dict(detail.get("jobStatus")))
    return f"{key}: {job_state(detail)}" + (f" (waiting: {waiting})" if waiting else "")


def render_final(key: str, detail: dict[str, Any]) -> str:
    status = _dict(detail.get("jobStatus"))
    state = job_state(detail)
    exit_text = format_exit(status.get("appExitCode"), status.get("appExitSpec"))
    return f"{key} {state}" + (f" (exit code {exit_text})" if state != "SUCCEEDED" and exit_text != MISSING else "")


def _task_rows(detail: dict[str, Any]) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for role, body in _dict(detail.get("taskRoles")).items():
        for task in _list(_dict(body).get("taskStatuses")):
            task = _dict(task)
            rows.append((
                role,
                task.get("taskIndex"),
                task.get("taskState"),
                task.get("containerNodeName"),
                task.get("containerIp"),
                format_ports(task.get("containerPorts")),
                task.get("containerExitCode"),
                task.get("retries"),
            ))
    return rows


def proxy_url(master: str, key: str, role: str, index: object, label: str) -> str:
    """Where a task's labelled port is opened through the master (its proxy, ``/proxy/{user}~{job}/...``)."""
    return f"{master.rstrip('/')}/proxy/{quote(key, safe='~')}/{quote(role, safe='')}/{index}/{quote(label, safe='')}/"


def _proxied(detail: dict[str, Any], key: str, master: str) -> list[tuple[object, ...]]:
    """A row per labelled port of each running task but ``ssh`` (no web page: ``pai ssh``)."""
    rows: list[tuple[object, ...]] = []
    for role, body in _dict(detail.get("taskRoles")).items():
        for task in map(_dict, _list(_dict(body).get("taskStatuses"))):
            if task.get("taskState") != "RUNNING":
                continue
            for label, ports in _dict(task.get("containerPorts")).items():
                if label != "ssh" and ports:
                    rows.append((f"{role}[{task.get('taskIndex')}]", label,
                                 proxy_url(master, key, role, task.get("taskIndex"), label)))
    return rows


def _event_time(value: object) -> str:
    return format_time(value) if isinstance(value, int | float) else cell(value)


def render_job_detail(detail: dict[str, Any], master: str | None = None) -> str:
    """The job for people; with the ``master``'s URL, also where each port of its running tasks opens."""
    status = _dict(detail.get("jobStatus"))
    name = detail.get("name")
    key = name if isinstance(name, str) and "~" in name else f"{status.get('username')}~{name}"
    state = job_state(detail)
    sub = status.get("subState")
    lines = [
        f"Job: {key}",
        f"State: {state}" + (f" ({sub})" if sub and sub != state else ""),
        f"VC: {cell(status.get('virtualCluster'))}",
        f"Priority: {cell(status.get('priority'))}",
        f"Retries: {cell(status.get('retries'))}",
        f"Submitted: {format_time(status.get('createdTime'))}",
        f"Completed: {format_time(status.get('completedTime'))}",
        f"Exit: {format_exit(status.get('appExitCode'), status.get('appExitSpec'))}",
    ]
    if status.get("appExitDiagnostics"):
        lines.append(f"Diagnostics: {status['appExitDiagnostics']}")
    waiting = format_waiting(status)
    if waiting:
        lines.append(f"Waiting: {waiting}")
    lines += ["", render_table(TASK_HEADERS, _task_rows(detail))]
    proxied = _proxied(detail, key, master) if master else []
    if proxied:
        lines += ["", "Ports through the master (a browser opens them from the job's page on the dashboard):",
                  render_table(PROXY_HEADERS, proxied)]
    events = [_dict(e) for e in _list(detail.get("events"))]
    if events:
        rows = [(_event_time(e.get("time")), e.get("kind"), e.get("message")) for e in events]
        lines += ["", "Events:", render_table(EVENT_HEADERS, rows)]
    return "\n".join(lines)


def first_role(detail: dict[str, Any]) -> str | None:
    return next(iter(_dict(detail.get("taskRoles"))), None)
