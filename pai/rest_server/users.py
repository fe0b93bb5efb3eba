"""OpenPAI's user API (``/api/v2/users``): handlers of a few lines around ``Directory``, one service call each.

Reads need a token; changes need a person (not an application token), and ``Directory`` checks admin or self in
the transaction that makes the change. Bodies are checked against ``job_schemas/users-api.json``; answers and
codes are OpenPAI's (201 with a message for a change, 200 for a removal).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from pai.domain.errors import ForbiddenUserError
from pai.jobspec.vcconfig import validate_users_api_body
from pai.launcher.directory import Directory, UserChanges
from pai.rest_server.bodies import json_body
from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, Credentials, credentials, reads, writes
from pai.store.records import User, UserProfile

# A change to the directory, by the caller: ``change(directory, caller's user)``.
Change = Callable[[Directory, User], object]


def user_view(p: UserProfile) -> dict[str, Any]:
    u = p.user
    return {"username": u.name, "grouplist": list(u.groups), "email": p.email, "extension": p.extension,
            "admin": u.admin, "virtualCluster": sorted(u.virtual_clusters), "storageConfig": sorted(u.storages)}


async def checked_body(request: web.Request, definition: str) -> dict[str, Any]:
    return validate_users_api_body(await json_body(request), definition)


@reads
def _users(c: Context) -> list[dict[str, Any]]:
    return [user_view(p) for p in c.launcher.directory.users()]


@reads
def _user(c: Context, name: str) -> dict[str, Any]:
    return user_view(c.launcher.directory.user(name))


@writes(person=True)
def _change(c: Context, change: Change) -> None:
    change(c.launcher.directory, c.user)


@writes(person=True)
def _update_me(c: Context, name: str, changes: UserChanges) -> None:
    if name != c.user.name:
        raise ForbiddenUserError("data.username: can't update other user's data")
    c.launcher.directory.update_self(c.user, changes)


async def answer_change(request: web.Request, creds: Credentials, change: Change, *, message: str,
                        status: int = 201) -> web.Response:
    """The caller (a person) makes ``change``; OpenPAI's answer: ``{"message": ...}`` with ``status``."""
    await request.app[SERVICE](creds, _change, change)
    return web.json_response({"message": message}, status=status)


async def list_users(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _users))


async def get_user(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _user, request.match_info["user"]))


async def create_user(request: web.Request) -> web.Response:
    creds = credentials(request)
    b = await checked_body(request, "userCreate")

    def create(d: Directory, by: User) -> User:
        return d.create_user(by, b["username"], b["password"], email=b.get("email", ""), admin=b.get("admin", False),
                             virtual_clusters=b.get("virtualCluster", []), extension=b.get("extension"))

    return await answer_change(request, creds, create, message="User is created successfully")


def _changes(data: dict[str, Any]) -> UserChanges:
    vcs = data.get("virtualCluster")
    return UserChanges(email=data.get("email"), virtual_clusters=None if vcs is None else tuple(vcs),
                       admin=data.get("admin"), password=data.get("password", data.get("newPassword")),
                       old_password=data.get("oldPassword"), extension=data.get("extension"))


async def update_user(request: web.Request) -> web.Response:
    """``PUT /api/v2/users {data, patch}``: an admin changes any user."""
    creds = credentials(request)
    data = (await checked_body(request, "userUpdate"))["data"]
    name, changes = data["username"], _changes(data)
    return await answer_change(request, creds, lambda d, by: d.update_user(by, name, changes),
                               message=f"Update user {name} successfully")


async def update_me(request: web.Request) -> web.Response:
    """``PUT /api/v2/users/me {data, patch}``: a user changes their own e-mail, extension or password."""
    creds = credentials(request)
    data = (await checked_body(request, "selfUpdate"))["data"]
    name = data["username"]
    await request.app[SERVICE](creds, _update_me, name, _changes(data))
    return web.json_response({"message": f"Update user {name} successfully"}, status=201)


async def delete_user(request: web.Request) -> web.Response:
    creds, name = credentials(request), request.match_info["user"]
    return await answer_change(request, creds, lambda d, by: d.delete_user(by, name),
                               message="user is removed successfully", status=200)


async def _legacy(request: web.Request, definition: str) -> tuple[Credentials, str, dict[str, Any]]:
    creds = credentials(request)
    return creds, request.match_info["user"], await checked_body(request, definition)


async def set_password(request: web.Request) -> web.Response:
    creds, name, b = await _legacy(request, "passwordBody")
    return await answer_change(request, creds,
                               lambda d, by: d.set_password(by, name, b["newPassword"], b.get("oldPassword")),
                               message="update user password successfully.")


def _setter(definition: str, field: str, method: str, message: str) -> Handler:
    """A legacy ``PUT /api/v2/users/{user}/...`` call: one body field handed to one ``Directory`` method."""

    async def handler(request: web.Request) -> web.Response:
        creds, name, b = await _legacy(request, definition)
        return await answer_change(request, creds, lambda d, by: getattr(d, method)(by, name, b[field]),
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
