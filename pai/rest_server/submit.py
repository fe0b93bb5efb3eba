"""Job submission: ``POST /api/v2/jobs`` and OpenPAI's ``POST /api/v1/user/{user}/jobs``.

The body (at most ``MasterConfig.max_body_bytes``) is parsed in a worker thread, so that a large YAML document
never stalls the event loop, against the cluster's priority classes and job-size limits; a refused spec stores
nothing.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from pai.domain.errors import ForbiddenUserError
from pai.jobspec import parse_job
from pai.rest_server.auth import current_user
from pai.rest_server.keys import LAUNCHER, LOOP, STORE


async def _submit(request: web.Request, user: str) -> web.Response:
    body = await request.read()
    launcher = request.app[LAUNCHER]
    classes, limits = await request.app[STORE].read(launcher.submission_rules)
    parsed = await asyncio.to_thread(parse_job, body, request.content_type, classes, limits)
    job = await request.app[STORE].call(launcher.submit, user, parsed.spec, parsed.text)
    request.app[LOOP].wake()
    return web.json_response(
        {"message": f"update job {job.name} successfully", "jobName": job.key}, status=202
    )


async def submit_v2(request: web.Request) -> web.Response:
    user = await current_user(request)
    return await _submit(request, user.name)


async def submit_v1(request: web.Request) -> web.Response:
    user = await current_user(request)
    owner = request.match_info["user"]
    if owner != user.name:
        raise ForbiddenUserError(f"user {user.name} may not submit jobs as {owner}")
    return await _submit(request, owner)
