"""A job's attempts, its tasks' attempts, their log lists and the job's events (OpenPAI's paths and shapes;
rendered by ``pai.rest_server.job_views``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from pai.domain.errors import InvalidParametersError, NoJobError, NoTaskLogError
from pai.launcher import queries
from pai.launcher.access import hide_other_users_jobs, owner_of
from pai.launcher.job_attempts import JobAttempt, find_attempt, job_attempts
from pai.rest_server import job_views
from pai.rest_server.jobs import key_of, reader
from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, credentials, reads

Render = Callable[[queries.JobDetail, list[JobAttempt]], Any]


@reads
def _read(c: Context, key: str, render: Render) -> bytes:
    """The job, read and rendered in the operation's transaction."""
    everyone = reader(c, [owner_of(key)])
    found = queries.job_detail(c.db, key)
    answer = render(found, job_attempts(found.job, found.attempts))
    return json.dumps(hide_other_users_jobs(answer, c.user, everyone)).encode()


@reads
def _healthz(c: Context) -> None:
    reader(c, [])


async def _answer(request: web.Request, render: Render) -> web.Response:
    body = await request.app[SERVICE](credentials(request), _read, key_of(request), render)
    return web.Response(body=body, content_type="application/json")


def _attempt(request: web.Request, found: queries.JobDetail, attempts: list[JobAttempt]) -> JobAttempt:
    index = int(request.match_info["attempt"])
    a = find_attempt(attempts, index)
    if a is None:
        raise NoJobError(f"job {found.job.key} has no attempt {index} (its attempts: "
                         f"{', '.join(str(x.index) for x in attempts)})")
    return a


def _task(request: web.Request, found: queries.JobDetail) -> tuple[str, int]:
    role, index = request.match_info["role"], int(request.match_info["index"])
    spec = next((r for r in found.job.spec.task_roles if r.name == role), None)
    if spec is None or index >= (spec.elastic.max_instances if spec.elastic is not None else spec.instances):
        raise NoJobError(f"job {found.job.key} has no task {role}[{index}]")
    return role, index


async def attempt_detail(request: web.Request) -> web.Response:
    """``GET /api/v2/jobs/{job}/attempts/{attempt}``: JobDetail of one job attempt."""
    return await _answer(request, lambda found, attempts: job_views.attempt_detail(
        found, _attempt(request, found, attempts)))


async def list_job_attempts(request: web.Request) -> web.Response:
    """``GET /api/v2/jobs/{job}/job-attempts``: the latest attempt first, then the earlier ones (OpenPAI's order)."""
    return await _answer(request, lambda found, attempts: [
        job_views.job_attempt_view(found, a) for a in [attempts[-1], *attempts[:-1]]])


async def job_attempt(request: web.Request) -> web.Response:
    """``GET /api/v2/jobs/{job}/job-attempts/{attempt}``."""
    return await _answer(request, lambda found, attempts: job_views.job_attempt_view(
        found, _attempt(request, found, attempts)))


async def job_attempts_healthz(request: web.Request) -> web.Response:
    """``GET /api/v2/jobs/{job}/job-attempts/healthz``: attempts are kept by the master itself, always there."""
    await request.app[SERVICE](credentials(request), _healthz)
    return web.Response(text="ok")


async def task_detail(request: web.Request) -> web.Response:
    """``GET .../attempts/{attempt}/taskRoles/{role}/taskIndex/{index}/attempts``: a task and its attempts."""
    def render(found: queries.JobDetail, attempts: list[JobAttempt]) -> Any:
        a = _attempt(request, found, attempts)
        return job_views.task_detail(found, a, *_task(request, found))

    return await _answer(request, render)


async def task_logs(request: web.Request) -> web.Response:
    """``GET .../taskIndex/{index}/attempts/{task_attempt}/logs``: where the attempt's stdout and stderr are read
    (``tail-mode=true``: their tails)."""
    def render(found: queries.JobDetail, attempts: list[JobAttempt]) -> Any:
        a = _attempt(request, found, attempts)
        role, index = _task(request, found)
        rows = a.task_attempts(role, index)
        n = int(request.match_info["task_attempt"])
        if n >= len(rows):
            raise NoTaskLogError(f"task {role}[{index}] of {found.job.key} has no attempt {n} in job attempt "
                                 f"{a.index}, so no log")
        tail = request.query.get("tail-mode", request.query.get("tailMode"))  # the JS SDK sends tailMode
        return job_views.log_locations(found.job, rows[n], tail == "true")

    return await _answer(request, render)


async def events(request: web.Request) -> web.Response:
    """``GET /api/v2/jobs/{job}/events[?type=Warning|Normal]``: the job's events, newest first."""
    wanted = request.query.get("type") or None
    if wanted not in (None, "Normal", "Warning"):
        raise InvalidParametersError(f"type: {wanted!r} is not one of Normal, Warning", field="type")

    def render(found: queries.JobDetail, attempts: list[JobAttempt]) -> Any:
        return job_views.events_view(found, wanted)

    return await _answer(request, render)
