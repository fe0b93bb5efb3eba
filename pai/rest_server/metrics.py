"""``GET /metrics`` (Prometheus's text format, no token, as node-exporter: keep the port on the operators' network),
``GET /metrics/agents`` (where the agents' metrics are) and the middleware that times every REST request by its
route."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST

from pai.launcher.metrics import ClusterGauges, VcUsage
from pai.rest_server.keys import LAUNCHER, STORE, VCADMIN


async def metrics(request: web.Request) -> web.Response:
    app = request.app
    launcher, store = app[LAUNCHER], app[STORE]
    nodes, reports, (jobs, waiting_since, now) = await asyncio.gather(
        store.read(launcher.node_usage), store.read(app[VCADMIN].reports), store.read(launcher.job_counts))
    vcs = [VcUsage(r.quota.name, r.quota.guaranteed, r.quota.max or r.total, r.used, r.borrowed, r.running, r.pending)
           for r in reports]
    body = launcher.metrics.render(ClusterGauges(nodes, vcs, jobs, waiting_since, now))
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def agent_targets(request: web.Request) -> web.Response:
    """``GET /metrics/agents``: every agent's /metrics address in Prometheus's HTTP service-discovery format
    (``http_sd_configs``), so that a node that joins is scraped without editing Prometheus's configuration."""
    nodes = await request.app[STORE].read(request.app[LAUNCHER].node_usage)
    return web.json_response([{"targets": [f"{n.address}:{n.log_port}"], "labels": {"node": n.name}}
                              for n, _ in nodes if n.log_port])


@web.middleware
async def timing_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``pai_rest_request_duration_seconds{method, route, status_class}``: the route's pattern, never the path
    (a label per job name would grow without bound); a path no route matches is ``unmatched``."""
    began = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as e:
        status = e.status
        raise
    finally:
        resource = request.match_info.route.resource
        route = resource.canonical.removesuffix("{trailing_slash}") if resource is not None else "unmatched"
        request.app[LAUNCHER].metrics.rest_seconds.labels(request.method, route, f"{status // 100}xx").observe(
            time.perf_counter() - began)
