"""Job submission: ``POST /api/v2/jobs`` and OpenPAI v0.14's ``/api/v1`` forms (``submit_v1``).

The handler reads the body (at most ``MasterConfig.max_body_bytes``); one operation then checks the caller, reads
the cluster's priority classes and job-size limits, parses the body against them and stores the job, all in one
transaction off the event loop (a large YAML document never stalls it); a refused spec stores nothing.

``POST /api/v2/jobs?dryRun=true`` (the dashboard's editor, as the user types) runs the same parsing and checks
(``Launcher.admit``: the VC, rights, paths, storages; and that the name is free) on a reader, stores nothing and
answers 200 with what a submission would have. An error about a field of the body carries its ``line``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.errors import ConflictJobError, ForbiddenUserError, InvalidParametersError
from pai.domain.job import job_key
from pai.jobspec import parse_job
from pai.jobspec.form import parse_form_job
from pai.jobspec.lines import located
from pai.rest_server.bodies import FORM_TYPES, form_pairs
from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, credentials, reads, writes
from pai.store import jobs as store_jobs


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
        with located(raw):
            parsed = parse_job(raw, content_type, classes, limits)
    if name is not None and parsed.spec.name != name:
        raise InvalidParametersError(f"jobName: the body names {parsed.spec.name!r}, the path {name!r}",
                                     field="jobName")
    with located(raw):
        try:
            # accepted: the fields not honoured here, and what no node could ever hold (both also in its events)
            submitted = c.launcher.accept(user, parsed.spec, parsed.text, parsed.warnings)
        except ConflictJobError as e:  # the name's line, as a dry run's
            e.field = e.field or _name_field(parsed.protocol_version)
            raise
    return {"message": f"update job {submitted.job.name} successfully", "jobName": submitted.job.key,
            "warnings": [w.to_dict() for w in submitted.warnings]}


@reads
def _dry_run(c: Context, raw: bytes, content_type: str) -> dict[str, Any]:
    """``_submit``'s parsing and checks, nothing stored (a reader's transaction)."""
    classes, limits = c.launcher.submission_rules()
    with located(raw):
        parsed = parse_job(raw, content_type, classes, limits)
        with c.db.session() as s:
            spec = c.launcher.admit(s, c.user, parsed.spec)
            warnings = (*parsed.warnings, *c.launcher.foreseen(s, spec))
            key = job_key(c.user.name, parsed.spec.name)
            if store_jobs.key_exists(s, key):
                raise ConflictJobError(f"job {key} already exists", field=_name_field(parsed.protocol_version))
    return {"message": f"job {key} would be accepted (dry run: nothing stored)", "jobName": key, "dryRun": True,
            "protocolVersion": parsed.protocol_version, "warnings": [w.to_dict() for w in warnings]}


def _name_field(protocol_version: int) -> str:
    return "jobName" if protocol_version == 1 else "name"


def dry_run(request: web.Request) -> bool:
    """The ``dryRun`` query parameter: ``true`` or ``false`` (the default)."""
    value = request.query.get("dryRun", "false").lower()
    if value not in ("true", "false"):
        raise InvalidParametersError(f"dryRun: {value!r} is not true or false", field="dryRun")
    return value == "true"


async def submit_v2(request: web.Request) -> web.Response:
    creds = credentials(request)
    if dry_run(request):
        answer = await request.app[SERVICE](creds, _dry_run, await request.read(), request.content_type)
        return web.json_response(answer)
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
