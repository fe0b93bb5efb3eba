"""OpenPAI's group API (``/api/v2/groups``): what a group grants is in ``extension.acls`` (``pai.domain.groups``).
Reads need a token; changes need an admin (``Directory`` checks it)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from aiohttp import web

from pai.domain.errors import InvalidParametersError
from pai.domain.groups import Group
from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, credentials, reads
from pai.rest_server.users import answer_change, checked_body


def group_view(g: Group) -> dict[str, Any]:
    return {"groupname": g.name, "description": g.description, "externalName": g.external_name,
            "extension": dict(g.extension)}


@reads
def _groups(c: Context) -> list[dict[str, Any]]:
    return [group_view(g) for g in c.launcher.directory.groups()]


@reads
def _group(c: Context, name: str) -> dict[str, Any]:
    return group_view(c.launcher.directory.group(name))


@reads
def _members(c: Context, name: str) -> list[dict[str, Any]]:
    return [{"username": u.name, "clusterAdmin": u.admin} for u in c.launcher.directory.members(c.user, name)]


async def list_groups(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _groups))


async def get_group(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _group, request.match_info["group"]))


async def group_users(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _members, request.match_info["group"]))


async def create_group(request: web.Request) -> web.Response:
    creds = credentials(request)
    b = await checked_body(request, "groupCreate")
    group = Group(b["groupname"], b.get("description", ""), b.get("externalName", ""), b.get("extension", {}))
    return await answer_change(request, creds, lambda d, by: d.create_group(by, group),
                               message="group is created successfully")


async def update_group(request: web.Request) -> web.Response:
    """``PUT /api/v2/groups {data, patch}``: without ``patch`` the fields given replace the group's; with it, those
    given change and the extension's keys given replace those keys."""
    creds = credentials(request)
    b = await checked_body(request, "groupUpdate")
    data, patch = b["data"], b.get("patch", False)

    def change(g: Group) -> Group:
        if not patch:
            return Group(g.name, data["description"], data["externalName"], data["extension"])
        return Group(g.name, data.get("description", g.description), data.get("externalName", g.external_name),
                     {**g.extension, **data.get("extension", {})})

    name = data["groupname"]
    return await answer_change(request, creds, lambda d, by: d.update_group(by, name, change),
                               message=f"update group {name} successfully.")


async def delete_group(request: web.Request) -> web.Response:
    creds, name = credentials(request), request.match_info["group"]
    return await answer_change(request, creds, lambda d, by: d.delete_group(by, name),
                               message="group is removed successfully", status=200)


async def _set(request: web.Request, definition: str, change: Any, message: str) -> web.Response:
    creds, name = credentials(request), request.match_info["group"]
    b = await checked_body(request, definition)
    return await answer_change(request, creds, lambda d, by: d.update_group(by, name, lambda g: change(g, b)),
                               message=message)


async def set_description(request: web.Request) -> web.Response:
    return await _set(request, "descriptionBody", lambda g, b: replace(g, description=b["description"]),
                      "update group description data successfully.")


async def set_external_name(request: web.Request) -> web.Response:
    return await _set(request, "externalNameBody", lambda g, b: replace(g, external_name=b["externalName"]),
                      "update group externalNameData data successfully.")


async def set_extension(request: web.Request) -> web.Response:
    return await _set(request, "extensionBody",
                      lambda g, b: replace(g, extension={**g.extension, **b["extension"]}),
                      "update group extension data successfully.")


async def set_extension_attr(request: web.Request) -> web.Response:
    """``PUT /api/v2/groups/{g}/extension/{a}/{b}... {"data": v}``: sets ``extension.a.b`` to ``v``."""
    keys = [k for k in request.match_info["attr"].split("/") if k]
    if not keys:
        raise InvalidParametersError("path: name the extension attribute to set, e.g. extension/acls/admin",
                                     field="path")
    return await _set(request, "extensionAttr",
                      lambda g, b: replace(g, extension=_assign(g.extension, keys, b["data"])),
                      "Update group extension data successfully.")


def _assign(tree: Any, keys: list[str], value: Any) -> dict[str, Any]:
    node = dict(tree) if isinstance(tree, dict) else {}
    node[keys[0]] = value if len(keys) == 1 else _assign(node.get(keys[0]), keys[1:], value)
    return node
