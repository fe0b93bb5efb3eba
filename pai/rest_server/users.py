"""OpenPAI's user API (``/api/v2/users``): handlers of a few lines around ``Directory``.

Reads need a token; changes need a person (not an application token), and ``Directory`` checks admin or self in
the transaction that makes the change. Bodies are checked against ``job_schemas/users-api.json``; answers and
codes are OpenPAI's (201 with a message for a change, 200 for a removal).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from pai.domain.errors import ForbiddenUserError
from pai.jobspec.vcconfig import validate_users_api_body
from pai.launcher.directory import Directory, UserChanges
from pai.rest_server.auth import current_user, person
from pai.rest_server.bodies import json_body
from pai.rest_server.keys import LAUNCHER, STORE
from pai.store.records import User, UserProfile


def user_view(p: UserProfile) -> dict[str, Any]:
    u = p.user
    return {"username": u.name, "grouplist": list(u.groups), "email": p.email, "extension": p.extension,
            "admin": u.admin, "virtualCluster": sorted(u.virtual_clusters), "storageConfig": sorted(u.storages)}


def directory_of(request: web.Request) -> Directory:
    return request.app[LAUNCHER].directory


async def checked_body(request: web.Request, definition: str) -> dict[str, Any]:
    return validate_users_api_body(await json_body(request), definition)


async def answer_change(request: web.Request, method: Any, *args: Any, message: str,
                        status: int = 201) -> web.Response:
    await request.app[STORE].call(method, *args)
    return web.json_response({"message": message}, status=status)


async def list_users(request: web.Request) -> web.Response:
    await current_user(request)
    profiles = await request.app[STORE].read(directory_of(request).users)
    return web.json_response([user_view(p) for p in profiles])


async def get_user(request: web.Request) -> web.Response:
    await current_user(request)
    profile = await request.app[STORE].read(directory_of(request).user, request.match_info["user"])
    return web.json_response(user_view(profile))


async def create_user(request: web.Request) -> web.Response:
    by = (await person(request)).user
    b = await checked_body(request, "userCreate")
    d = directory_of(request)
    await request.app[STORE].call(
        lambda: d.create_user(by, b["username"], b["password"], email=b.get("email", ""), admin=b.get("admin", False),
                              virtual_clusters=b.get("virtualCluster", []), extension=b.get("extension")))
    return web.json_response({"message": "User is created successfully"}, status=201)


def _changes(data: dict[str, Any]) -> UserChanges:
    vcs = data.get("virtualCluster")
    return UserChanges(email=data.get("email"), virtual_clusters=None if vcs is None else tuple(vcs),
                       admin=data.get("admin"), password=data.get("password", data.get("newPassword")),
                       old_password=data.get("oldPassword"), extension=data.get("extension"))


async def update_user(request: web.Request) -> web.Response:
    """``PUT /api/v2/users {data, patch}``: an admin changes any user."""
    by = (await person(request)).user
    data = (await checked_body(request, "userUpdate"))["data"]
    name = data["username"]
    return await answer_change(request, directory_of(request).update_user, by, name, _changes(data),
                         message=f"Update user {name} successfully")


async def update_me(request: web.Request) -> web.Response:
    """``PUT /api/v2/users/me {data, patch}``: a user changes their own e-mail, extension or password."""
    by = (await person(request)).user
    data = (await checked_body(request, "selfUpdate"))["data"]
    if data["username"] != by.name:
        raise ForbiddenUserError("data.username: can't update other user's data")
    return await answer_change(request, directory_of(request).update_self, by, _changes(data),
                         message=f"Update user {by.name} successfully")


async def delete_user(request: web.Request) -> web.Response:
    by = (await person(request)).user
    return await answer_change(request, directory_of(request).delete_user, by, request.match_info["user"],
                         message="user is removed successfully", status=200)


async def _legacy(request: web.Request, definition: str) -> tuple[User, str, dict[str, Any]]:
    by = (await person(request)).user
    return by, request.match_info["user"], await checked_body(request, definition)


async def set_password(request: web.Request) -> web.Response:
    by, name, b = await _legacy(request, "passwordBody")
    return await answer_change(request, directory_of(request).set_password, by, name, b["newPassword"],
                               b.get("oldPassword"), message="update user password successfully.")


def _setter(definition: str, field: str, method: str, message: str) -> Handler:
    """A legacy ``PUT /api/v2/users/{user}/...`` call: one body field handed to one ``Directory`` method."""

    async def handler(request: web.Request) -> web.Response:
        by, name, b = await _legacy(request, definition)
        return await answer_change(request, getattr(directory_of(request), method), by, name, b[field],
                                   message=message.format(name=name, value=b[field]))

    return handler


set_email = _setter("emailBody", "email", "set_email", "Update user email data successfully.")
set_admin = _setter("adminBody", "admin", "set_admin", "Update user admin permission successfully.")
set_virtual_clusters = _setter("virtualClusterBody", "virtualCluster", "set_virtual_clusters",
                               "Update user virtualCluster data successfully.")
set_extension = _setter("extensionBody", "extension", "merge_extension", "Update user extension data successfully.")
set_group_list = _setter("grouplistBody", "grouplist", "set_group_list", "update user grouplist successfully.")
add_group = _setter("groupBody", "groupname", "add_to_group", "User {name} is added into group {value}")
remove_group = _setter("groupBody", "groupname", "remove_from_group", "User {name} is removed from group {value}")
