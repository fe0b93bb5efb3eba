"""``pai logs -f``: a task's log as it is written, across its attempts, until the task ends."""

from __future__ import annotations

import re
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pai.cli.api import MasterApi

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def since_value(raw: str | None) -> str | None:
    """``--since``: a duration before now (``90``, ``30s``, ``10m``, ``2h``, ``1d``) as seconds, or an ISO 8601 time
    as given; click's usage error otherwise."""
    if raw is None:
        return None
    found = _DURATION.fullmatch(raw.strip())
    if found:
        return f"{float(found[1]) * _UNIT[found[2]]:g}"
    try:
        datetime.fromisoformat(raw)
    except ValueError:
        raise click.BadParameter(f"{raw!r} is neither a duration (30s, 10m, 2h, 1d) nor an ISO 8601 time",
                                 param_hint="--since") from None
    return raw


def _task(detail: dict[str, Any], role: str, index: int) -> dict[str, Any]:
    statuses = (detail.get("taskRoles") or {}).get(role, {}).get("taskStatuses") or []
    return next((t for t in statuses if t.get("taskIndex") == index), {})


def how_it_ended(detail: dict[str, Any], key: str, role: str, index: int) -> str:
    """One line: the task's state and exit code, and its job's state."""
    task = _task(detail, role, index)
    code = task.get("containerExitCode")
    exit_part = f" (exit code {code})" if code is not None else ""
    job_state = (detail.get("jobStatus") or {}).get("state", "unknown")
    return f"task {role}[{index}] of job {key} ended: {task.get('taskState', 'unknown')}{exit_part}; job {job_state}"


def follow(api: MasterApi, key: str, role: str, index: int, stream: str, tail: int | None, since: str | None) -> None:
    """Print the log as it arrives; once the task has ended, say on stderr how."""
    out = sys.stdout.buffer
    with api.follow_log(key, role, index, stream, tail, since) as chunks:
        for chunk in chunks:
            out.write(chunk)
            out.flush()
    click.echo(how_it_ended(api.job(key), key, role, index), err=True)
