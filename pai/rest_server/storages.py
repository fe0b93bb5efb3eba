"""OpenPAI's storage API: ``GET /api/v2/storages`` (the storages the user may mount) and ``/{name}``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.storage import Storage
from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, credentials, reads


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


async def list_storages(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _list))


async def get_storage(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _get, request.match_info["name"]))
