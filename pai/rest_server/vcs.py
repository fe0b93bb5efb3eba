"""Virtual-cluster handlers: OpenPAI's v1 admin paths and our v2 form, plus job priority changes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from aiohttp import web

from pai.domain.errors import ForbiddenUserError, InvalidParametersError, NoVirtualClusterError
from pai.domain.groups import Group
from pai.domain.resources import Resources
from pai.jobspec.vcconfig import validate_vc
from pai.launcher.vcadmin import VcReport
from pai.rest_server.bodies import decode_json
from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, credentials, reads, writes
from pai.store.vcs import VcStatus


def _capped(r: Resources | None, total: Resources) -> Resources:
    if r is None:
        return total
    return Resources(min(r.gpu, total.gpu), min(r.cpu, total.cpu), min(r.memory_mb, total.memory_mb))


def resources_view(r: Resources) -> dict[str, int]:
    """Ours (``gpu, cpu, memoryMB``) and OpenPAI's names (``cpu, memory, gpu``; ``vCores, GPUs``) of the same."""
    return {**r.to_dict(), "memory": r.memory_mb, "vCores": r.cpu, "GPUs": r.gpu}


def vc_view(r: VcReport) -> dict[str, Any]:
    """OpenPAI's VC shape (``capacity`` percents, ``resourcesTotal``: what the VC is guaranteed, its cells in
    OpenPAI; ``dedicated``: a VC here is a share of the whole pool, never a set of nodes) and ours."""
    basis = "gpu" if r.total.gpu > 0 else "cpu"

    def pct(res: Resources) -> float:
        whole = getattr(r.total, basis)
        return round(100.0 * getattr(res, basis) / whole, 2) if whole else 0.0

    q = r.quota
    maximum = _capped(q.max, r.total)
    return {
        "name": q.name,
        "status": r.status.value,
        "capacity": pct(q.guaranteed),
        "maxCapacity": pct(maximum),
        "usedCapacity": pct(r.used),
        "capacityBasis": basis,
        "numRunningJobs": r.running,
        "numPendingJobs": r.pending,
        "dedicated": False,
        "nodeList": [],
        "resourcesTotal": resources_view(_capped(q.guaranteed, r.total)),
        "resourcesCluster": resources_view(r.total),
        "resourcesGuaranteed": resources_view(q.guaranteed),
        "resourcesMax": resources_view(maximum),
        "resourcesUsed": resources_view(r.used),
        "resourcesBorrowed": resources_view(r.borrowed),
        "lendingLimit": None if q.lending_limit is None else resources_view(_capped(q.lending_limit, r.total)),
        "preemption": {
            "reclaim": q.preemption.reclaim.value,
            "withinVc": q.preemption.within_vc.value,
            "whileBorrowing": {
                "enabled": q.preemption.while_borrowing.enabled,
                "priorityThreshold": q.preemption.while_borrowing.priority_threshold,
            },
        },
        "strictFifo": q.strict_fifo,
        "config": r.spec,
    }


@reads
def _list(c: Context) -> dict[str, Any]:
    return {r.quota.name: vc_view(r) for r in c.vcadmin.reports()}


@reads
def _get(c: Context, name: str) -> dict[str, Any]:
    for r in c.vcadmin.reports():
        if r.quota.name == name:
            return vc_view(r)
    raise NoVirtualClusterError(f"virtual cluster {name} not found")


async def list_vcs(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _list))


async def get_vc(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _get, request.match_info["vc"]))


def _admin(c: Context) -> None:
    if not c.user.admin:
        raise ForbiddenUserError(f"user {c.user.name} is not an admin; only admins change virtual clusters")


def _percent(body: dict[str, Any], key: str, default: float | None) -> float | None:
    value = body.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise InvalidParametersError(f"{key}: must be a number from 0 to 100", field=key)
    return float(value)


# The ops below decode the body (read by the handler) after the caller's check, as the handlers did: a user who
# is not an admin is refused (403) whatever the body says.

@writes(wakes=True)
def _put_v1(c: Context, name: str, raw: bytes) -> dict[str, Any]:
    """OpenPAI's form: ``{"vcCapacity": 50, "vcMaxCapacity": 100}``, percents of every resource."""
    _admin(c)
    return _put_openpai(c, name, decode_json(raw))


def _put_openpai(c: Context, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """Create or resize a VC from OpenPAI's body (``vcCapacity``, ``vcMaxCapacity``, and for a v2 path the
    ``description`` and ``externalName`` of its group)."""
    capacity = _percent(body, "vcCapacity", None)
    if capacity is None:
        raise InvalidParametersError("vcCapacity: is required", field="vcCapacity")
    maximum = _percent(body, "vcMaxCapacity", 100.0)
    assert maximum is not None
    if maximum < capacity:
        raise InvalidParametersError("vcMaxCapacity: must not be less than vcCapacity", field="vcMaxCapacity")
    group = {k: body[k] for k in ("description", "externalName") if k in body}
    for k, v in group.items():
        if not isinstance(v, str):
            raise InvalidParametersError(f"{k}: must be a string", field=k)

    def share(p: float) -> dict[str, str]:
        return {k: f"{p:g}%" for k in ("gpu", "cpu", "memoryMB")}

    changes = {"guaranteed": share(capacity), "max": share(maximum)}
    existed = any(r.quota.name == name for r in c.vcadmin.reports())
    c.vcadmin.update(name, changes, validate_vc)
    if group:
        def describe(g: Group) -> Group:
            return replace(g, description=group.get("description", g.description),
                           external_name=group.get("externalName", g.external_name))

        c.launcher.directory.update_group(c.user, name, describe)
    verb = "Update" if existed else "Create"
    return {"status": 201, "message": f"{verb} virtual cluster {name} to capacity {capacity:g} successfully."}


@writes(wakes=True)
def _put_v2(c: Context, name: str, raw: bytes) -> dict[str, Any]:
    _admin(c)
    body = decode_json(raw)
    if "vcCapacity" in body:
        return _put_openpai(c, name, body)
    body.setdefault("name", name)
    if body["name"] != name:
        raise InvalidParametersError(f"name: the body names {body['name']!r}, the path {name!r}", field="name")
    c.vcadmin.put(validate_vc(body))
    return {"message": f"update virtual cluster {name} successfully"}


@writes(wakes=True)
def _put_status(c: Context, name: str, raw: bytes) -> VcStatus:
    _admin(c)
    body = decode_json(raw)
    value = body.get("vcStatus", body.get("value"))
    allowed = ", ".join(s.value for s in VcStatus)
    if value is None:
        raise InvalidParametersError(f"vcStatus: is required, one of {allowed}", field="vcStatus")
    try:
        status = VcStatus(str(value).lower())
    except ValueError:
        raise InvalidParametersError(f"vcStatus: {value!r} is not one of {allowed}", field="vcStatus") from None
    c.vcadmin.set_status(name, status)
    return status


@writes(wakes=True)
def _delete(c: Context, name: str) -> None:
    _admin(c)
    c.vcadmin.delete(name)


@writes(wakes=True)
def _put_priority(c: Context, key: str, raw: bytes) -> str:
    value = decode_json(raw).get("value")
    if not isinstance(value, str) or not value:
        raise InvalidParametersError("value: a priority class name is required", field="value")
    c.launcher.set_priority(key, value, c.user)
    return value


async def put_vc_v1(request: web.Request) -> web.Response:
    creds = credentials(request)
    answer = await request.app[SERVICE](creds, _put_v1, request.match_info["vc"], await request.read())
    return web.json_response(answer, status=201)


async def put_vc_v2(request: web.Request) -> web.Response:
    """OpenPAI's body (``vcCapacity``...: ``_put_openpai``), or ours: one entry of the configuration's
    ``virtualClusters`` (job_schemas/vc-config.json)."""
    creds = credentials(request)
    answer = await request.app[SERVICE](creds, _put_v2, request.match_info["vc"], await request.read())
    return web.json_response(answer, status=201)


async def put_vc_status(request: web.Request) -> web.Response:
    creds, name = credentials(request), request.match_info["vc"]
    status = await request.app[SERVICE](creds, _put_status, name, await request.read())
    return web.json_response({"message": f"update virtual cluster {name} to {status.value} successfully"},
                             status=201)


async def delete_vc(request: web.Request) -> web.Response:
    name = request.match_info["vc"]
    await request.app[SERVICE](credentials(request), _delete, name)
    return web.json_response({"message": f"remove virtual cluster {name} successfully"})


async def put_priority(request: web.Request) -> web.Response:
    """``PUT /api/v2/jobs/{key}/priority {"value": "prod"}``: the owner or an admin; while the job is active."""
    creds, key = credentials(request), request.match_info["key"]
    value = await request.app[SERVICE](creds, _put_priority, key, await request.read())
    return web.json_response({"message": f"set priority of job {key} to {value} successfully"}, status=202)
