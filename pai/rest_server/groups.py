"""OpenPAI's group API (``/api/v2/groups``): what a group grants is in ``extension.acls`` (``pai.domain.groups``).
Reads need a token; changes need an admin (``Directory`` checks it)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from aiohttp import web

from pai.domain.errors import InvalidParametersError
from pai.domain.groups import Group
from pai.rest_server.auth import current_user, person
from pai.rest_server.keys import LAUNCHER, STORE
from pai.rest_server.users import answer_change, checked_body, directory_of


def group_view(g: Group) -> dict[str, Any]:
    return {"groupname": g.name, "description": g.description, "externalName": g.external_name,
            "extension": dict(g.extension)}


async def list_groups(request: web.Request) -> web.Response:
    await current_user(request)
    return web.json_response([group_view(g) for g in await request.app[STORE].read(directory_of(request).groups)])


async def get_group(request: web.Request) -> web.Response:
    await current_user(request)
    group = await request.app[STORE].read(directory_of(request).group, request.match_info["group"])
    return web.json_response(group_view(group))


async def group_users(request: web.Request) -> web.Response:
    by = await current_user(request)
    found = await request.app[STORE].read(request.app[LAUNCHER].directory.members, by, request.match_info["group"])
    return web.json_response([{"username": u.name, "clusterAdmin": u.admin} for u in found])


async def create_group(request: web.Request) -> web.Response:
    by = (await person(request)).user
    b = await checked_body(request, "groupCreate")
    group = Group(b["groupname"], b.get("description", ""), b.get("externalName", ""), b.get("extension", {}))
    return await answer_change(request, directory_of(request).create_group, by, group,
                         message="group is created successfully")


async def update_group(request: web.Request) -> web.Response:
    """``PUT /api/v2/groups {data, patch}``: without ``patch`` the fields given replace the group's; with it, those
    given change and the extension's keys given replace those keys."""
    by = (await person(request)).user
    b = await checked_body(request, "groupUpdate")
    data, patch = b["data"], b.get("patch", False)

    def change(g: Group) -> Group:
        if not patch:
            return Group(g.name, data["description"], data["externalName"], data["extension"])
        return Group(g.name, data.get("description", g.description), data.get("externalName", g.external_name),
                     {**g.extension, **data.get("extension", {})})

    return await answer_change(request, directory_of(request).update_group, by, data["groupname"], change,
                         message=f"update group {data['groupname']} successfully.")


async def delete_group(request: web.Request) -> web.Response:
    by = (await person(request)).user
    return await answer_change(request, directory_of(request).delete_group, by, request.match_info["group"],
                         message="group is removed successfully", status=200)


async def _set(request: web.Request, definition: str, change: Any, message: str) -> web.Response:
    by = (await person(request)).user
    b = await checked_body(request, definition)
    return await answer_change(request, directory_of(request).update_group, by, request.match_info["group"],
                         lambda g: change(g, b), message=message)


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
