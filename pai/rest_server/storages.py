"""OpenPAI's storage API: ``GET /api/v2/storages`` (the storages the user may mount) and ``/{name}``; an admin
creates, replaces and removes one with ``PUT`` and ``DELETE /api/v2/storages/{name}`` (an entry of the cluster
configuration's ``storages``, checked as the configuration file is)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.errors import ForbiddenUserError, InvalidParametersError
from pai.domain.storage import Storage
from pai.jobspec.vcconfig import validate_storage
from pai.rest_server.bodies import decode_json
from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, credentials, reads, writes


def summary(st: Storage) -> dict[str, Any]:
    """OpenPAI's storage summary (``share``: every node sees the same files; ``volumeName``: its name)."""
    return {"name": st.name, "share": True, "volumeName": st.name, "default": st.default, "readOnly": st.read_only}


def detail(st: Storage) -> dict[str, Any]:
    return summary(st) | {"type": "hostPath", "data": {"path": st.path}, "groups": list(st.groups)}


@reads
def _list(c: Context) -> dict[str, Any]:
    return {"storages": [summary(st) for st in c.launcher.storages(c.user)]}


@reads
def _get(c: Context, name: str) -> dict[str, Any]:
    return detail(c.launcher.storage(name, c.user))


def _admin(c: Context) -> None:
    if not c.user.admin:
        raise ForbiddenUserError(f"user {c.user.name} is not an admin; only admins change storages")


@writes(wakes=True)
def _put(c: Context, name: str, raw: bytes) -> bool:
    """The body is decoded after the caller's check: a user who is not an admin is refused whatever it says."""
    _admin(c)
    body = decode_json(raw, 'like {"path": "/nfs/data", "readOnly": false, "groups": [], "default": false}')
    body.setdefault("name", name)
    if body["name"] != name:
        raise InvalidParametersError(f"name: the body names {body['name']!r}, the path {name!r}", field="name")
    return c.vcadmin.put_storage(validate_storage(body))


@writes(wakes=True)
def _delete(c: Context, name: str) -> None:
    _admin(c)
    c.vcadmin.delete_storage(name)


async def list_storages(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _list))


async def get_storage(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _get, request.match_info["name"]))


async def put_storage(request: web.Request) -> web.Response:
    creds, name = credentials(request), request.match_info["name"]
    new = await request.app[SERVICE](creds, _put, name, await request.read())
    verb = "create" if new else "update"
    return web.json_response({"message": f"{verb} storage {name} successfully"}, status=201)


async def delete_storage(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await request.app[SERVICE](credentials(request), _delete, name)
    return web.json_response({"message": f"remove storage {name} successfully"})
