"""OpenPAI's storage API: ``GET /api/v2/storages`` (the storages the user may mount) and ``/{name}``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.storage import Storage
from pai.rest_server.auth import current_user
from pai.rest_server.keys import LAUNCHER, STORE


def summary(st: Storage) -> dict[str, Any]:
    """OpenPAI's storage summary (``share``: every node sees the same files; ``volumeName``: its name)."""
    return {"name": st.name, "share": True, "volumeName": st.name, "default": st.default, "readOnly": st.read_only}


def detail(st: Storage) -> dict[str, Any]:
    return summary(st) | {"type": "hostPath", "data": {"path": st.path}, "groups": list(st.groups)}


async def list_storages(request: web.Request) -> web.Response:
    user = await current_user(request)
    found = await request.app[STORE].read(request.app[LAUNCHER].storages, user)
    return web.json_response({"storages": [summary(st) for st in found]})


async def get_storage(request: web.Request) -> web.Response:
    user = await current_user(request)
    st = await request.app[STORE].read(request.app[LAUNCHER].storage, request.match_info["name"], user)
    return web.json_response(detail(st))
