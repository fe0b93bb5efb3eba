"""Job submission: ``POST /api/v2/jobs`` and OpenPAI's ``POST /api/v1/user/{user}/jobs``.

The body (at most ``MasterConfig.max_body_bytes``) is parsed against the cluster's priority classes and job-size
limits in a worker thread, so that a large YAML document never stalls the event loop, once the reads in flight are
done (``StoreThread.behind_reads``); a refused spec stores nothing.
"""

from __future__ import annotations

from aiohttp import web

from pai.domain.errors import ForbiddenUserError
from pai.jobspec import parse_job
from pai.jobspec.form import parse_form_job
from pai.rest_server.auth import current_user
from pai.rest_server.bodies import FORM_TYPES, form_pairs
from pai.rest_server.keys import LAUNCHER, LOOP, STORE
from pai.store.records import User


async def _submit(request: web.Request, user: User, *, form_v1: bool = False) -> web.Response:
    launcher = request.app[LAUNCHER]
    rules = launcher.cached_submission_rules()  # the configuration cached: no hop to a reader thread
    classes, limits = rules if rules is not None else await request.app[STORE].read(launcher.submission_rules)
    if form_v1 and request.content_type in FORM_TYPES:  # OpenPAI's VS Code extension posts a v1 job as a form
        pairs = await form_pairs(request)
        parsed = await request.app[STORE].behind_reads(parse_form_job, pairs, classes, limits)
    else:
        body = await request.read()
        parsed = await request.app[STORE].behind_reads(parse_job, body, request.content_type, classes, limits)
    job = await request.app[STORE].call(launcher.submit, user, parsed.spec, parsed.text)
    request.app[LOOP].wake()
    return web.json_response(
        {"message": f"update job {job.name} successfully", "jobName": job.key}, status=202
    )


async def submit_v2(request: web.Request) -> web.Response:
    return await _submit(request, await current_user(request))


async def submit_v1(request: web.Request) -> web.Response:
    user = await current_user(request)
    owner = request.match_info["user"]
    if owner != user.name:
        raise ForbiddenUserError(f"user {user.name} may not submit jobs as {owner}")
    return await _submit(request, user, form_v1=True)
