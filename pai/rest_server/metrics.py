"""``GET /metrics`` (Prometheus's text format, no token, as node-exporter: keep the port on the operators' network),
``GET /metrics/agents`` (where the agents' metrics are) and the middleware that times every REST request by its
route."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from pai.launcher.metrics import ClusterGauges, VcUsage
from pai.rest_server.keys import LAUNCHER, PART, SERVICE, Part
from pai.rest_server.service import Context, anonymous

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
REST_FAMILY = "pai_rest_request_duration_seconds"
REPORT_BATCH_FAMILY = "pai_trial_report_batch_size"


@anonymous(writes=False)
def _metrics(c: Context, api: bool) -> bytes:
    """The cluster's gauges, read in one transaction, with (an API worker) every worker's requests or (the
    launcher's process) the launcher's own metrics."""
    jobs, waiting_since, now = c.launcher.job_counts()
    vcs = [VcUsage(r.quota.name, r.quota.guaranteed, r.quota.max or r.total, r.used, r.borrowed, r.running, r.pending)
           for r in c.vcadmin.reports()]
    gauges = ClusterGauges(c.launcher.node_usage(), vcs, jobs, waiting_since, now)
    return generate_latest(_registry(_Requests(), gauges)) if api else c.launcher.metrics.render(gauges)


async def metrics(request: web.Request) -> web.Response:
    # an API worker: every worker's requests, and the cluster (the launcher's own metrics are on its port)
    body = await request.app[SERVICE](None, _metrics, request.app[PART] is Part.API)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _registry(*collectors: Collector) -> CollectorRegistry:
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    return registry


class _Requests(Collector):
    """``pai_rest_request_duration_seconds`` and ``pai_trial_report_batch_size`` summed over the API workers:
    gunicorn's arbiter is started with prometheus_client's multiprocess directory (``pai.rest_server.serve``), where
    each worker's values are kept."""

    def collect(self) -> Iterator[Metric]:
        workers = MultiProcessCollector(None, os.environ[MULTIPROC_ENV])  # type: ignore[no-untyped-call]
        for family in workers.collect():  # type: ignore[no-untyped-call]
            if family.name in (REST_FAMILY, REPORT_BATCH_FAMILY):
                yield family


@anonymous(writes=False)
def _agent_targets(c: Context) -> list[dict[str, Any]]:
    return [{"targets": [f"{n.address}:{n.log_port}"], "labels": {"node": n.name}}
            for n, _ in c.launcher.node_usage() if n.log_port]


async def agent_targets(request: web.Request) -> web.Response:
    """``GET /metrics/agents``: every agent's /metrics address in Prometheus's HTTP service-discovery format
    (``http_sd_configs``), so that a node that joins is scraped without editing Prometheus's configuration."""
    return web.json_response(await request.app[SERVICE](None, _agent_targets))


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
