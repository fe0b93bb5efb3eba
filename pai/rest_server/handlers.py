"""Small handlers: info, health, nodes, and the internal agent endpoints."""

from __future__ import annotations

import ipaddress
import time
from typing import Any

from aiohttp import web

from pai.domain.errors import ForbiddenUserError, InvalidParametersError, NotLeaderError, NoVirtualClusterError
from pai.domain.node import NodeState
from pai.domain.node import sku_types as node_sku_types
from pai.jobspec.agentmsg import check_agent_message
from pai.launcher.access import may_read_jobs_of, owner_of
from pai.protocol.messages import HeartbeatRequest, ProtocolError, RegisterRequest
from pai.rest_server.auth import check_agent
from pai.rest_server.bodies import json_body
from pai.rest_server.jobs import reader
from pai.rest_server.keys import CHANNELS, CONFIG, DB, LOOP, ROLE, SERVICE, STORE
from pai.rest_server.service import Context, credentials, reads, writes
from pai.rest_server.views import node_view
from pai.store import leases, masters
from pai.store.db import Database
from pai.version import __version__


async def api_v1(request: web.Request) -> web.Response:
    return web.json_response({"name": "pai", "version": __version__, "message": "pai REST server"})


async def info(request: web.Request) -> web.Response:
    """OpenPAI's cluster info. ``launcherType`` is ``k8s`` (OpenPAI >= v1.0), the value whose client behaviour fits
    pai: its portal and clients then expect runtime plugins (ssh), no YARN tracking page and no HDFS data commands
    written into jobs (docs/api.md says why)."""
    body: dict[str, Any] = {"name": "pai", "version": __version__, "launcherType": "k8s", "authnMethod": "basic"}
    if _is_loopback(request.remote):
        # For `pai up` on this machine, which names the data directory of the master holding its port. Only
        # local callers see it; any local user can read it from the master's command line anyway.
        body["dataDir"] = str(request.app[CONFIG].data_dir)
    return web.json_response(body)


def _is_loopback(address: str | None) -> bool:
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


async def healthz(request: web.Request) -> web.Response:
    """Up; with the launcher's passes so far where this process runs the launcher."""
    body: dict[str, Any] = {"status": "ok"}
    if LOOP in request.app:
        body["schedulingPasses"] = request.app[LOOP].passes
    return web.json_response(body)


@reads
def _nodes(c: Context) -> list[dict[str, Any]]:
    everyone = reader(c, ())
    return [node_view(r, lambda job: may_read_jobs_of(c.user, owner_of(job), everyone))
            for r in c.launcher.node_reports()]


async def list_nodes(request: web.Request) -> web.Response:
    """Every node; another user's tasks only counted where users read their own jobs only (``pai.launcher.access``)."""
    return web.json_response(await request.app[SERVICE](credentials(request), _nodes))


@reads
def _sku_types(c: Context, vc: str | None) -> dict[str, dict[str, Any]]:
    if vc is not None and all(r.quota.name != vc for r in c.vcadmin.reports()):
        raise NoVirtualClusterError(f"virtual cluster {vc} not found")
    skus = node_sku_types(n for n, _ in c.launcher.node_usage())
    return {name: {"cpu": r.cpu, "memory": r.memory_mb, "gpu": r.gpu} for name, r in skus.items()}


async def sku_types(request: web.Request) -> web.Response:
    """``GET /api/v2/cluster/sku-types[?vc=VC]`` and ``/api/v2/virtual-clusters/{vc}/sku-types``: OpenPAI's
    ``{sku: {cpu, memory, gpu}}``. A VC's share is of the whole pool, so every VC has every SKU of the cluster."""
    creds = credentials(request)
    vc = request.match_info.get("vc") or request.query.get("vc")
    return web.json_response(await request.app[SERVICE](creds, _sku_types, vc))


_NODE_STATES = {s.value: s for s in (NodeState.READY, NodeState.CORDONED, NodeState.DRAINING)}


@writes(wakes=True)
def _set_node_state(c: Context, name: str, value: object) -> None:
    """Admins only; the value is checked after the caller (a user who is not an admin hears 403 first)."""
    if not c.user.admin:
        raise ForbiddenUserError(f"user {c.user.name} is not an admin; only admins cordon nodes")
    if not isinstance(value, str) or value not in _NODE_STATES:
        raise InvalidParametersError(f"value: {value!r} is not one of {', '.join(_NODE_STATES)}", field="value")
    c.launcher.set_node_state(name, _NODE_STATES[value])


async def set_node_state(request: web.Request) -> web.Response:
    """``PUT /api/v2/nodes/{node}/state {"value": "CORDONED" | "DRAINING" | "READY"}``: admins only."""
    creds = credentials(request)
    body = await json_body(request)
    name, value = request.match_info["node"], body.get("value")
    await request.app[SERVICE](creds, _set_node_state, name, value)
    return web.json_response({"name": name, "state": value})


async def agent_elsewhere(request: web.Request) -> web.Response:
    """An agent reached an API worker (PostgreSQL): NotLeaderError naming the leading launcher's URL, where the
    agent goes (none while no launcher leads: the agent tries its next master)."""
    check_agent(request)
    raise NotLeaderError(await request.app[STORE].read(_leader_url, request.app[DB]))


def _leader_url(db: Database) -> str | None:
    with db.session() as s:
        lease = leases.current(s, leases.LAUNCHER)
    return None if lease is None or lease.expires_at < time.time() else masters.url_of(lease.holder)


async def agent_register(request: web.Request) -> web.Response:
    check_agent(request)
    request.app[ROLE].require()  # a standby: NotLeaderError, naming the leader
    try:
        req = RegisterRequest.from_dict(check_agent_message(await json_body(request), "register"))
    except ProtocolError as e:
        raise InvalidParametersError(str(e)) from None
    reply = await request.app[LOOP].register(req)
    return web.json_response(reply.to_dict())


async def agent_channel(request: web.Request) -> web.StreamResponse:
    check_agent(request)
    request.app[ROLE].require()
    return await request.app[CHANNELS].serve(request)


async def agent_heartbeat(request: web.Request) -> web.Response:
    check_agent(request)
    request.app[ROLE].require()
    try:
        req = HeartbeatRequest.from_dict(check_agent_message(await json_body(request), "heartbeat"))
    except ProtocolError as e:
        raise InvalidParametersError(str(e)) from None
    if req.node != request.match_info["node"]:
        raise InvalidParametersError(f"node: the body names {req.node!r}, the path {request.match_info['node']!r}")
    reply = await request.app[LOOP].heartbeat(req)
    if any(r.status.value == "exited" for r in req.containers):
        request.app[LOOP].wake()
    return web.json_response(reply.to_dict())
