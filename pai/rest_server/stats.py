"""Cluster figures the dashboard shows: how many jobs are in each state, a VC's usage over time and its queue."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.errors import InvalidParametersError
from pai.launcher import queries
from pai.launcher.access import hide_other_users_jobs, may_read_jobs_of
from pai.launcher.usage import MAX_HOURS
from pai.rest_server.auth import current_user
from pai.rest_server.jobs import int_param, reader
from pai.rest_server.keys import LAUNCHER, STORE
from pai.rest_server.views import job_summary, ms
from pai.store.stats import VcUsageSample

MAX_QUEUE = 1000  # the most waiting jobs one queue request returns


async def job_counts(request: web.Request) -> web.Response:
    """``GET /api/v2/cluster/job-counts``: the jobs in each state (of the caller alone where users read only their
    own jobs, as the list)."""
    user, everyone = await reader(request, ())
    users = None if may_read_jobs_of(user, "", everyone) else (user.name,)
    counts = await request.app[STORE].read(queries.job_counts, request.app[LAUNCHER].db, users)
    return web.json_response({"total": sum(counts.values()), "byState": {s.value: n for s, n in counts.items()}})


def sample_view(x: VcUsageSample) -> dict[str, Any]:
    return {"time": ms(x.at), "used": x.used.to_dict(), "guaranteed": x.guaranteed.to_dict(), "max": x.max.to_dict(),
            "runningJobs": x.running_jobs, "waitingJobs": x.waiting_jobs}


async def usage_history(request: web.Request) -> web.Response:
    """``GET /api/v2/virtual-clusters/{vc}/usage-history?hours=24``: the VC's samples, oldest first."""
    await current_user(request)
    hours = int_param(request, "hours", 24, maximum=MAX_HOURS)
    if hours < 1:
        raise InvalidParametersError(f"hours: {hours} is less than the minimum of 1", field="hours")
    vc = request.match_info["vc"]
    samples = await request.app[STORE].read(request.app[LAUNCHER].usage.history, vc, hours)
    every = request.app[LAUNCHER].config.usage_sample_seconds
    return web.json_response({"name": vc, "hours": hours, "sampleSeconds": every,
                              "samples": [sample_view(x) for x in samples]})


async def vc_queue(request: web.Request) -> web.Response:
    """``GET /api/v2/virtual-clusters/{vc}/queue?limit=50``: the VC's first waiting jobs in queue order, each a job
    summary with its waiting reason (its position, and why it waits)."""
    user, everyone = await reader(request, ())
    limit = int_param(request, "limit", 50, maximum=MAX_QUEUE)
    launcher = request.app[LAUNCHER]
    queue = await request.app[STORE].read(queries.vc_queue, launcher.db, launcher.clusters, request.match_info["vc"],
                                          limit)
    jobs = [hide_other_users_jobs({**job_summary(j), "waitingReason": j.waiting_reason}, user, everyone)
            for j in queue.jobs if may_read_jobs_of(user, j.user, everyone)]  # where jobs are private: the caller's own
    return web.json_response({"name": request.match_info["vc"], "total": queue.total, "jobs": jobs})
