"""Job handlers: list, detail, config, attempts, stop, logs (submission: ``pai.rest_server.submit``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, overload

import yaml
from aiohttp import ClientError, ClientTimeout, web

from pai.domain.errors import InvalidParametersError, NoTaskLogError
from pai.domain.limits import INT32_MAX
from pai.domain.states import JobState
from pai.jobspec import stored_config
from pai.launcher import job_removal, jobtags, queries
from pai.launcher.access import hide_other_users_jobs, may_read_jobs_of, owner_of, require_reader
from pai.launcher.jobtags import check_tag
from pai.launcher.logs import MAX_LOG_BYTES, LogLocation
from pai.launcher.queries import JobFilters, Order
from pai.launcher.service import StopResult
from pai.rest_server.bodies import json_body
from pai.rest_server.job_views import job_detail
from pai.rest_server.keys import AGENT_TOKEN, HTTP, SERVICE
from pai.rest_server.service import Context, credentials, reads, writes
from pai.rest_server.views import attempt_view, summary_view
from pai.store.db import Database
from pai.store.records import User
from pai.store.summaries import SORT_FIELDS, SortField


@overload
def int_param(request: web.Request, name: str, default: int, maximum: int = INT32_MAX) -> int: ...


@overload
def int_param(request: web.Request, name: str, default: None, maximum: int = INT32_MAX) -> int | None: ...


def int_param(request: web.Request, name: str, default: int | None, maximum: int = INT32_MAX) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    negative, written = raw.startswith("-"), raw.removeprefix("-")
    shown = raw if len(raw) <= 20 else raw[:17] + "..."
    if not (written.isascii() and written.isdigit()):
        raise InvalidParametersError(f"{name}: {shown!r} is not an integer", field=name)
    digits = written.lstrip("0") or "0"  # int() of a long text is refused; leading zeros are not digits
    if negative and digits != "0":
        raise InvalidParametersError(f"{name}: {shown} is less than the minimum of 0", field=name)
    if len(digits) > 10 or int(digits) > maximum:
        raise InvalidParametersError(f"{name}: {shown} is greater than the maximum of {maximum}", field=name)
    return int(digits)


def _states(raw: str | None) -> tuple[JobState, ...] | None:
    if not raw:
        return None
    try:
        return tuple(JobState(s.strip().upper()) for s in raw.split(","))
    except ValueError:
        allowed = ", ".join(s.value for s in JobState)
        raise InvalidParametersError(f"state: {raw!r} is not one of {allowed}", field="state") from None


def _order(raw: str) -> tuple[SortField, Order]:
    """OpenPAI's ``order=<field>,ASC|DESC`` (``submissionTime,DESC`` by default), or our ``asc``/``desc`` alone."""
    field, _, direction = raw.partition(",")
    if not direction and field.lower() in ("asc", "desc"):
        field, direction = "submissionTime", field
    if field not in SORT_FIELDS:
        raise InvalidParametersError(f"order: {field!r} is not one of {', '.join(SORT_FIELDS)} (like "
                                     "order=submissionTime,DESC)", field="order")
    if direction.upper() not in ("ASC", "DESC"):
        raise InvalidParametersError(f"order: {direction!r} is not one of ASC, DESC (like order={field},DESC)",
                                     field="order")
    return field, "asc" if direction.upper() == "ASC" else "desc"


def _names(raw: str | None) -> tuple[str, ...] | None:
    """A comma-separated filter (OpenPAI's ``username=a,b``); empty or absent: no filter."""
    if not raw:
        return None
    return tuple(dict.fromkeys(n.strip() for n in raw.split(",") if n.strip())) or None


def reader(c: Context, owners: Iterable[str]) -> bool:
    """In an operation: the caller must be allowed to read jobs of every one of ``owners``; whether everyone may read
    every job."""
    everyone = c.launcher.jobs_readable_by_all()
    for owner in owners:
        require_reader(c.user, owner, everyone)
    return everyone


@reads
def _list(c: Context, users: tuple[str, ...] | None, filters: JobFilters) -> bytes:
    """One page of the job list as the API answers it (OpenPAI's shape; with ``totalCount`` when asked). Where
    users read only their own jobs, a list without ``username`` is the caller's."""
    everyone = reader(c, users or ())
    if users is None and not may_read_jobs_of(c.user, "", everyone):  # may not read every user's jobs
        users = (c.user.name,)
    page = queries.list_jobs(c.db, replace(filters, users=users))
    data = [summary_view(j) for j in page.jobs]
    return json.dumps(data if page.total is None else {"totalCount": page.total, "data": data}).encode()


@reads
def _detail(c: Context, key: str) -> bytes:
    everyone = reader(c, [owner_of(key)])
    return json.dumps(hide_other_users_jobs(job_detail(queries.job_detail(c.db, key)), c.user, everyone)).encode()


@reads
def _config(c: Context, key: str) -> str:
    reader(c, [owner_of(key)])
    return queries.job_config_text(c.db, key)


@reads
def _attempts(c: Context, key: str) -> list[dict[str, Any]]:
    everyone = reader(c, [owner_of(key)])
    attempts = [attempt_view(a) for a in queries.job_attempts(c.db, key)]
    return list(hide_other_users_jobs(attempts, c.user, everyone))


@writes(wakes=True)
def _stop(c: Context, key: str) -> StopResult:
    return c.launcher.stop(key, c.user)


@reads
def _log_location(c: Context, key: str, role: str, index: int, attempt: str | None) -> LogLocation:
    reader(c, [owner_of(key)])
    return c.launcher.locate_log(key, role, index, attempt)


@writes()
def _tag(c: Context, change: Callable[[Database, str, str, User], bool], key: str, tag: str) -> bool:
    return change(c.db, key, tag, c.user)


@writes()
def _delete(c: Context, key: str) -> None:
    job_removal.delete_job(c.db, key, c.user)


async def list_jobs(request: web.Request) -> web.Response:
    """OpenPAI's job list: ``limit`` defaults to 5,000 and may not pass 50,000 (``pai.launcher.queries``). Where
    users read only their own jobs, a list without ``username`` is the caller's."""
    q, creds = request.query, credentials(request)
    users = _names(request.match_info.get("user") or q.get("username"))  # v0.14: /api/v1/user/{user}/jobs
    sort, order = _order(q.get("order", "submissionTime,DESC"))
    filters = JobFilters(
        users=users,
        vcs=_names(q.get("vc")),
        states=_states(q.get("state")),
        keyword=q.get("keyword") or None,
        tags_contain=_names(q.get("tagsContain")),
        tags_not_contain=_names(q.get("tagsNotContain")),
        offset=int_param(request, "offset", 0),
        limit=int_param(request, "limit", queries.DEFAULT_LIMIT, maximum=queries.MAX_LIMIT),
        sort=sort,
        order=order,
        with_total=q.get("withTotalCount", "").lower() == "true",
    )
    body = await request.app[SERVICE](creds, _list, users, filters)
    return web.Response(body=body, content_type="application/json")


def key_of(request: web.Request) -> str:
    """``user~job``: from ``/api/v2/jobs/{key}``, or from OpenPAI v0.14's ``/api/v1/user/{user}/jobs/{name}``."""
    found = request.match_info
    return found["key"] if "key" in found else f"{found['user']}~{found['name']}"


async def job_detail_handler(request: web.Request) -> web.Response:
    body = await request.app[SERVICE](credentials(request), _detail, key_of(request))
    return web.Response(body=body, content_type="application/json")


async def job_config(request: web.Request) -> web.Response:
    text = await request.app[SERVICE](credentials(request), _config, key_of(request))
    config, version = stored_config(text)
    accept = request.headers.get("Accept", "")
    if "yaml" in accept or (version == 2 and "json" not in accept):
        return web.Response(text=yaml.safe_dump(config, sort_keys=False), content_type="text/yaml")
    return web.json_response(config)


async def job_attempts(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _attempts, key_of(request)))


async def execution_type(request: web.Request) -> web.Response:
    creds = credentials(request)
    body = await json_body(request, 'like {"value": "STOP"}')
    value = body.get("value")
    if value not in ("STOP", "START"):
        raise InvalidParametersError(f"value: {value!r} is not one of STOP, START", field="value")
    key = key_of(request)
    if value == "START":
        raise InvalidParametersError("value: START is not supported; submit the job again", field="value")
    result = await request.app[SERVICE](creds, _stop, key)
    if result.already_ended:
        # OpenPAI answers 202 here too (stopping is idempotent); the message says that nothing changed.
        state = result.job.state.value
        return web.json_response({"message": f"job {key} has already ended ({state}): nothing to stop",
                                  "jobState": state, "alreadyEnded": True}, status=202)
    return web.json_response({"message": f"execute job {key} successfully", "jobState": result.job.state.value,
                              "alreadyEnded": False}, status=202)


async def task_log(request: web.Request) -> web.Response:
    key, creds = key_of(request), credentials(request)
    role = request.match_info["role"]
    stream = request.match_info["stream"]
    try:
        index = int(request.match_info["index"])
    except ValueError:
        raise InvalidParametersError("index: must be an integer", field="index") from None
    tail = int_param(request, "tail", None)
    attempt = request.query.get("attempt") or None
    where = await request.app[SERVICE](creds, _log_location, key, role, index, attempt)
    url = f"http://{where.address}:{where.port}/logs/{where.attempt_id}/{stream}"
    # A full read is capped: the last MAX_LOG_BYTES of the file, and X-Log-Truncated says so (also when the node's
    # on-disk cap dropped earlier output; X-Log-Dropped says how much).
    params = {"tail": str(min(tail, MAX_LOG_BYTES) if tail is not None else MAX_LOG_BYTES)}
    try:
        headers = {"Authorization": f"Bearer {request.app[AGENT_TOKEN]}"}  # the log server serves only the master
        async with request.app[HTTP].get(url, params=params, headers=headers, timeout=ClientTimeout(total=30)) as resp:
            text = await resp.text(errors="replace")
            if resp.status != 200:
                raise NoTaskLogError(f"node {where.node} has no {stream} of attempt {where.attempt_id} of "
                                  f"{role}[{index}] of {key}")
            size = int(resp.headers.get("X-Log-Size", "0"))
            dropped = int(resp.headers.get("X-Log-Dropped", "0"))
    except ClientError as e:
        raise NoTaskLogError(f"the agent of node {where.node} ({where.address}:{where.port}) did not answer for the "
                          f"log: {e}") from None
    truncated = tail is None and (size > MAX_LOG_BYTES or dropped > 0)
    out = {"X-Log-Size": str(size), "X-Attempt-Id": where.attempt_id, "X-Log-Truncated": str(truncated).lower(),
           "X-Log-Dropped": str(dropped)}
    return web.Response(text=text, content_type="text/plain", headers=out)



async def _tag_change(request: web.Request, change: Callable[[Database, str, str, User], bool],
                      done: str) -> web.Response:
    creds = credentials(request)
    body = await json_body(request, 'like {"value": "baseline"}')
    key = key_of(request)
    tag = check_tag(body.get("value"))
    changed = await request.app[SERVICE](creds, _tag, change, key, tag)
    note = "" if changed else f" (it {'had' if change is jobtags.add_tag else 'did not have'} it already)"
    return web.json_response({"status": 200, "message": f"{done} tag {tag} for job {key} successfully{note}"})


async def add_tag(request: web.Request) -> web.Response:
    """``PUT /api/v2/jobs/{job}/tag {"value": TAG}``: the owner or an admin."""
    return await _tag_change(request, jobtags.add_tag, "Add")


async def delete_tag(request: web.Request) -> web.Response:
    """``DELETE /api/v2/jobs/{job}/tag {"value": TAG}``: the owner or an admin."""
    return await _tag_change(request, jobtags.remove_tag, "Delete")


async def delete_job(request: web.Request) -> web.Response:
    """OpenPAI v0.14's ``DELETE /api/v1/user/{user}/jobs/{job}`` (and ``/api/v1/jobs/{user~job}``): an ended job
    is deleted, its name free again."""
    key = key_of(request)
    await request.app[SERVICE](credentials(request), _delete, key)
    return web.json_response({"message": f"deleted job {key} successfully"}, status=202)
