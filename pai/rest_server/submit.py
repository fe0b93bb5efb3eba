"""Job submission: ``POST /api/v2/jobs`` and OpenPAI v0.14's ``/api/v1`` forms (``submit_v1``).

The handler reads the body (at most ``MasterConfig.max_body_bytes``); one operation then checks the caller, reads
the cluster's priority classes and job-size limits, parses the body against them and stores the job, all in one
transaction off the event loop (a large YAML document never stalls it); a refused spec stores nothing.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.errors import ForbiddenUserError, InvalidParametersError
from pai.jobspec import parse_job
from pai.jobspec.form import parse_form_job
from pai.rest_server.bodies import FORM_TYPES, form_pairs
from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, credentials, writes


@writes(wakes=True)
def _submit(c: Context, owner: str | None, name: str | None, pairs: list[tuple[str, str]] | None, raw: bytes,
            content_type: str) -> dict[str, Any]:
    """``owner``: the user the path names (v1), who must be the caller; ``name``: the job's name the path names
    (v1 ``PUT``), which must be the body's; ``pairs``: a form's fields (else ``raw`` is the body)."""
    user = c.user
    if owner is not None and owner != user.name:
        raise ForbiddenUserError(f"user {user.name} may not submit jobs as {owner}")
    classes, limits = c.launcher.submission_rules()
    if pairs is not None:
        parsed = parse_form_job(pairs, classes, limits)
    else:
        parsed = parse_job(raw, content_type, classes, limits)
    if name is not None and parsed.spec.name != name:
        raise InvalidParametersError(f"jobName: the body names {parsed.spec.name!r}, the path {name!r}",
                                     field="jobName")
    # accepted: the fields not honoured here, and what no node could ever hold (both also in its events)
    submitted = c.launcher.accept(user, parsed.spec, parsed.text, parsed.warnings)
    return {"message": f"update job {submitted.job.name} successfully", "jobName": submitted.job.key,
            "warnings": [w.to_dict() for w in submitted.warnings]}


async def submit_v2(request: web.Request) -> web.Response:
    creds = credentials(request)
    answer = await request.app[SERVICE](creds, _submit, None, None, None, await request.read(), request.content_type)
    return web.json_response(answer, status=202)


async def submit_v1(request: web.Request) -> web.Response:
    """OpenPAI v0.14's ``POST /api/v1/jobs`` and ``POST /api/v1/user/{user}/jobs``; ``PUT`` with the job's name
    in the path (``/api/v1/jobs/{name}``, ``/api/v1/user/{user}/jobs/{name}``), which must be the body's."""
    creds = credentials(request)
    pairs, raw = None, b""
    if request.content_type in FORM_TYPES:  # OpenPAI's VS Code extension posts a v1 job as a form
        pairs = await form_pairs(request)
    else:
        raw = await request.read()
    answer = await request.app[SERVICE](creds, _submit, request.match_info.get("user"),
                                        request.match_info.get("name"), pairs, raw, request.content_type)
    return web.json_response(answer, status=202)
