"""Cluster figures the dashboard shows: how many jobs are in each state, a VC's usage over time and its queue."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.errors import InvalidParametersError
from pai.launcher import queries
from pai.launcher.access import hide_other_users_jobs, may_read_jobs_of
from pai.launcher.usage import MAX_HOURS
from pai.rest_server.jobs import int_param, reader
from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, credentials, reads
from pai.rest_server.views import job_summary, ms
from pai.store.stats import VcUsageSample

MAX_QUEUE = 1000  # the most waiting jobs one queue request returns


@reads
def _job_counts(c: Context) -> dict[str, Any]:
    everyone = reader(c, ())
    users = None if may_read_jobs_of(c.user, "", everyone) else (c.user.name,)
    counts = queries.job_counts(c.db, users)
    return {"total": sum(counts.values()), "byState": {s.value: n for s, n in counts.items()}}


async def job_counts(request: web.Request) -> web.Response:
    """``GET /api/v2/cluster/job-counts``: the jobs in each state (of the caller alone where users read only their
    own jobs, as the list)."""
    return web.json_response(await request.app[SERVICE](credentials(request), _job_counts))


def sample_view(x: VcUsageSample) -> dict[str, Any]:
    return {"time": ms(x.at), "used": x.used.to_dict(), "guaranteed": x.guaranteed.to_dict(), "max": x.max.to_dict(),
            "runningJobs": x.running_jobs, "waitingJobs": x.waiting_jobs}


@reads
def _usage_history(c: Context, vc: str, hours: int) -> dict[str, Any]:
    samples = c.launcher.usage.history(vc, hours)
    return {"name": vc, "hours": hours, "sampleSeconds": c.launcher.config.usage_sample_seconds,
            "samples": [sample_view(x) for x in samples]}


async def usage_history(request: web.Request) -> web.Response:
    """``GET /api/v2/virtual-clusters/{vc}/usage-history?hours=24``: the VC's samples, oldest first."""
    creds = credentials(request)
    hours = int_param(request, "hours", 24, maximum=MAX_HOURS)
    if hours < 1:
        raise InvalidParametersError(f"hours: {hours} is less than the minimum of 1", field="hours")
    return web.json_response(await request.app[SERVICE](creds, _usage_history, request.match_info["vc"], hours))


@reads
def _vc_queue(c: Context, vc: str, limit: int) -> dict[str, Any]:
    everyone = reader(c, ())
    queue = queries.vc_queue(c.db, c.launcher.clusters, vc, limit)
    jobs = [hide_other_users_jobs({**job_summary(j), "waitingReason": j.waiting_reason}, c.user, everyone)
            for j in queue.jobs if may_read_jobs_of(c.user, j.user, everyone)]  # where jobs are private: the caller's
    return {"name": vc, "total": queue.total, "jobs": jobs}


async def vc_queue(request: web.Request) -> web.Response:
    """``GET /api/v2/virtual-clusters/{vc}/queue?limit=50``: the VC's first waiting jobs in queue order, each a job
    summary with its waiting reason (its position, and why it waits)."""
    creds = credentials(request)
    limit = int_param(request, "limit", 50, maximum=MAX_QUEUE)
    return web.json_response(await request.app[SERVICE](creds, _vc_queue, request.match_info["vc"], limit))
