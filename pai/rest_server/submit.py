"""Job submission: ``POST /api/v2/jobs`` and OpenPAI v0.14's ``/api/v1`` forms (``submit_v1``).

The body (at most ``MasterConfig.max_body_bytes``) is parsed against the cluster's priority classes and job-size
limits on a reader thread, so that a large YAML document never stalls the event loop; a refused spec stores
nothing.
"""

from __future__ import annotations

from aiohttp import web

from pai.domain.errors import ForbiddenUserError, InvalidParametersError
from pai.jobspec import parse_job
from pai.jobspec.form import parse_form_job
from pai.rest_server.auth import current_user
from pai.rest_server.bodies import FORM_TYPES, form_pairs
from pai.rest_server.keys import LAUNCHER, STORE, WAKE
from pai.store.records import User


async def _submit(request: web.Request, user: User, *, form_v1: bool = False, name: str | None = None
                  ) -> web.Response:
    launcher = request.app[LAUNCHER]
    classes, limits = await request.app[STORE].read(launcher.submission_rules)
    if form_v1 and request.content_type in FORM_TYPES:  # OpenPAI's VS Code extension posts a v1 job as a form
        pairs = await form_pairs(request)
        parsed = await request.app[STORE].read(parse_form_job, pairs, classes, limits)
    else:
        body = await request.read()
        parsed = await request.app[STORE].read(parse_job, body, request.content_type, classes, limits)
    if name is not None and parsed.spec.name != name:
        raise InvalidParametersError(f"jobName: the body names {parsed.spec.name!r}, the path {name!r}",
                                     field="jobName")
    job = await request.app[STORE].call(launcher.submit, user, parsed.spec, parsed.text, parsed.warnings)
    request.app[WAKE]()
    answer = {"message": f"update job {job.name} successfully", "jobName": job.key,
              "warnings": [w.to_dict() for w in parsed.warnings]}  # accepted, not honoured here (also in its events)
    return web.json_response(answer, status=202)


async def submit_v2(request: web.Request) -> web.Response:
    return await _submit(request, await current_user(request))


async def submit_v1(request: web.Request) -> web.Response:
    """OpenPAI v0.14's ``POST /api/v1/jobs`` and ``POST /api/v1/user/{user}/jobs``; ``PUT`` with the job's name
    in the path (``/api/v1/jobs/{name}``, ``/api/v1/user/{user}/jobs/{name}``), which must be the body's."""
    user = await current_user(request)
    owner = request.match_info.get("user", user.name)
    if owner != user.name:
        raise ForbiddenUserError(f"user {user.name} may not submit jobs as {owner}")
    return await _submit(request, user, form_v1=True, name=request.match_info.get("name"))
