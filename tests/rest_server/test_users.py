"""OpenPAI's user API over HTTP: who may do what, the shapes and codes, and that rights follow the groups at once."""

from __future__ import annotations

from typing import Any

import pytest

from tests.rest_server.conftest import Api

JOB = "protocolVersion: 2\nname: {name}\ntype: job\ndefaults: {{virtualCluster: {vc}}}\n" \
      "prerequisites:\n  - {{type: dockerimage, name: img, uri: busybox}}\n" \
      "taskRoles:\n  w:\n    instances: 1\n    dockerImage: img\n" \
      "    resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}\n    commands: ['true']\n"


async def create(api: Api, name: str, **fields: Any) -> str:
    """A user made by the admin through the API; logged in, their token."""
    status, body = await api.call("POST", "/api/v2/users",
                                  json_body={"username": name, "password": f"{name}-password", **fields},
                                  token=await api.login())
    assert (status, body) == (201, {"message": "User is created successfully"})
    return await api.login(name, f"{name}-password")


async def add_vc(api: Api, name: str) -> None:
    status, _ = await api.call("PUT", f"/api/v2/virtual-clusters/{name}", json_body={}, token=await api.login())
    assert status == 201


async def submit(api: Api, token: str, name: str, vc: str = "default") -> tuple[int, Any]:
    return await api.call("POST", "/api/v2/jobs", body=JOB.format(name=name, vc=vc), content_type="text/yaml",
                          token=token)


async def jobs_of(api: Api, user: str) -> list[str]:
    status, body = await api.call("GET", f"/api/v2/jobs?username={user}", token=await api.login())
    assert status == 200
    return [j["name"] for j in body]


async def test_a_created_user_has_openpais_shape(api: Api) -> None:
    await add_vc(api, "dev")
    await create(api, "alice", email="alice@example.com", virtualCluster=["dev"], extension={"team": "x"})
    status, body = await api.call("GET", "/api/v2/users/alice")
    assert status == 200
    assert body == {"username": "alice", "grouplist": ["default", "dev"], "email": "alice@example.com",
                    "extension": {"team": "x"}, "admin": False, "virtualCluster": ["default", "dev"],
                    "storageConfig": []}
    status, listed = await api.call("GET", "/api/v2/users")
    admin = next(u for u in listed if u["username"] == "admin")
    assert admin["admin"] is True and admin["virtualCluster"] == ["default", "dev"]  # an admin's: every VC
    assert [u["username"] for u in listed] == ["admin", "alice"]


@pytest.mark.parametrize(
    ("body", "status", "code", "mentions"),
    [
        pytest.param({"username": "admin", "password": "secret1"}, 409, "ConflictUserError", "admin",
                     id="name taken"),
        pytest.param({"username": "bo b", "password": "secret1"}, 400, "InvalidParametersError", "username",
                     id="name with a space"),
        pytest.param({"username": "bob", "password": "short"}, 400, "InvalidParametersError", "password",
                     id="password under 6"),
        pytest.param({"username": "bob"}, 400, "InvalidParametersError", "password", id="no password"),
        pytest.param({"username": "bob", "password": "secret1", "virtualCluster": ["nope"]}, 404,
                     "NoVirtualClusterError", "nope", id="unknown VC"),
        pytest.param({"username": "bob", "password": "secret1", "email": "not-an-address"}, 400,
                     "InvalidParametersError", "email: 'not-an-address' is not an e-mail address", id="bad e-mail"),
        pytest.param({"username": "bob", "password": "secret1", "role": "x"}, 400, "InvalidParametersError",
                     "role", id="unknown field"),
    ],
)
async def test_bad_creations_are_refused_and_store_nothing(api: Api, body: dict[str, Any], status: int, code: str,
                                                          mentions: str) -> None:
    got, answer = await api.call("POST", "/api/v2/users", json_body=body)
    assert (got, answer["code"]) == (status, code) and mentions in answer["message"]
    _, listed = await api.call("GET", "/api/v2/users")
    assert [u["username"] for u in listed] == ["admin"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        pytest.param("POST", "/api/v2/users", {"username": "eve", "password": "secret1"}, id="create a user"),
        pytest.param("DELETE", "/api/v2/users/admin", None, id="delete a user"),
        pytest.param("PUT", "/api/v2/users", {"patch": True, "data": {"username": "bob", "admin": True}},
                     id="update a user"),
        pytest.param("PUT", "/api/v2/users/bob/admin", {"admin": True}, id="make themself admin"),
        pytest.param("PUT", "/api/v2/users/bob/grouplist", {"grouplist": ["admingroup"]}, id="regroup"),
        pytest.param("PUT", "/api/v2/users/bob/group", {"groupname": "admingroup"}, id="join a group"),
        pytest.param("PUT", "/api/v2/users/admin/password", {"newPassword": "hacked1"}, id="another's password"),
        pytest.param("PUT", "/api/v2/users/admin/email", {"email": "x@y.z"}, id="another's e-mail"),
        pytest.param("POST", "/api/v2/groups", {"groupname": "mine"}, id="create a group"),
        pytest.param("PUT", "/api/v2/groups/default/extension/acls/admin", {"data": True}, id="change a group"),
        pytest.param("DELETE", "/api/v2/groups/default", None, id="delete a group"),
        pytest.param("GET", "/api/v2/groups/default/userlist", None, id="a group's users"),
        pytest.param("PUT", "/api/v2/virtual-clusters/dev", {}, id="change a VC"),
    ],
)
async def test_a_non_admin_is_refused(api: Api, method: str, path: str, body: Any) -> None:
    bob = await create(api, "bob")
    status, answer = await api.call(method, path, json_body=body, token=bob)
    assert (status, answer["code"]) == (403, "ForbiddenUserError"), answer
    _, me = await api.call("GET", "/api/v2/users/bob", token=bob)
    assert me["admin"] is False and me["grouplist"] == ["default"]
    assert await api.login("admin", "admin-password")  # the admin's password is unchanged


async def test_a_vc_outside_the_users_groups_is_refused_until_a_group_grants_it(api: Api) -> None:
    await add_vc(api, "dev")
    bob = await create(api, "bob")
    status, answer = await submit(api, bob, "j1", "dev")
    assert (status, answer["code"]) == (403, "ForbiddenUserError") and "dev" in answer["message"]
    assert await jobs_of(api, "bob") == []
    assert (await submit(api, bob, "j0"))[0] == 202  # the default VC: every user's
    status, _ = await api.call("PUT", "/api/v2/users/bob/group", json_body={"groupname": "dev"},
                               token=await api.login())
    assert status == 201
    assert (await submit(api, bob, "j1", "dev"))[0] == 202  # at once: the cached rights were dropped
    assert sorted(await jobs_of(api, "bob")) == ["j0", "j1"]
    status, _ = await api.call("DELETE", "/api/v2/users/bob/group", json_body={"groupname": "dev"})
    assert status == 201
    assert (await submit(api, bob, "j2", "dev"))[0] == 403


async def test_a_custom_group_grants_vcs_and_admin(api: Api) -> None:
    await add_vc(api, "dev")
    bob = await create(api, "bob")
    status, _ = await api.call("POST", "/api/v2/groups", token=await api.login(), json_body={
        "groupname": "team", "description": "the team", "extension": {"acls": {"virtualClusters": ["dev"]}}})
    assert status == 201
    await api.call("PUT", "/api/v2/users/bob/grouplist", json_body={"grouplist": ["default", "team"]})
    assert (await submit(api, bob, "j1", "dev"))[0] == 202
    status, _ = await api.call("PUT", "/api/v2/groups/team/extension/acls/admin", json_body={"data": True})
    assert status == 201
    assert (await api.call("POST", "/api/v2/groups", json_body={"groupname": "bobs"}, token=bob))[0] == 201
    status, members = await api.call("GET", "/api/v2/groups/team/userlist", token=bob)
    assert (status, members) == (200, [{"username": "bob", "clusterAdmin": True}])


async def test_password_change_ends_logins_but_not_application_tokens(api: Api) -> None:
    bob = await create(api, "bob")
    status, app = await api.call("POST", "/api/v2/tokens/application", token=bob)
    assert status == 200
    status, answer = await api.call("PUT", "/api/v2/users/bob/password",
                                    json_body={"oldPassword": "wrong-one", "newPassword": "new-secret"}, token=bob)
    assert (status, answer["code"]) == (403, "ForbiddenUserError")
    status, _ = await api.call("PUT", "/api/v2/users/bob/password",
                               json_body={"oldPassword": "bob-password", "newPassword": "new-secret"}, token=bob)
    assert status == 201
    assert (await api.call("GET", "/api/v2/users/bob", token=bob))[0] == 401
    assert (await api.call("GET", "/api/v2/users/bob", token=app["token"]))[0] == 200
    status, answer = await api.call("POST", "/api/v2/authn/basic/login",
                                    json_body={"username": "bob", "password": "bob-password"})
    assert (status, answer["code"]) == (400, "IncorrectPasswordError")
    assert await api.login("bob", "new-secret")


async def test_users_me_changes_only_the_caller(api: Api) -> None:
    bob = await create(api, "bob")
    status, answer = await api.call("PUT", "/api/v2/users/me", token=bob, json_body={
        "patch": True, "data": {"username": "admin", "email": "x@example.com"}})
    assert (status, answer["code"]) == (403, "ForbiddenUserError")
    status, _ = await api.call("PUT", "/api/v2/users/me", token=bob, json_body={
        "patch": True, "data": {"username": "bob", "email": "bob@example.com", "extension": {"editor": "vim"}}})
    assert status == 201
    status, answer = await api.call("PUT", "/api/v2/users/me", token=bob, json_body={
        "data": {"username": "bob", "email": "bob@example.com"}})
    assert (status, answer["code"]) == (400, "InvalidParametersError") and "newPassword" in answer["message"]
    _, me = await api.call("GET", "/api/v2/users/bob", token=bob)
    assert (me["email"], me["extension"]) == ("bob@example.com", {"editor": "vim"})
    status, answer = await api.call("PUT", "/api/v2/users/me", token=bob, json_body={
        "patch": True, "data": {"username": "bob", "newPassword": "another1", "oldPassword": "wrong-one"}})
    assert (status, answer["code"]) == (403, "ForbiddenUserError")


async def test_admin_update_replaces_or_patches(api: Api) -> None:
    await add_vc(api, "dev")
    await create(api, "bob", virtualCluster=["dev"])
    status, answer = await api.call("PUT", "/api/v2/users", token=await api.login(), json_body={
        "data": {"username": "bob", "email": "b@example.com"}})
    assert (status, answer["code"]) == (400, "InvalidParametersError")  # not a patch: every field is required
    status, _ = await api.call("PUT", "/api/v2/users", json_body={
        "data": {"username": "bob", "email": "b@example.com", "virtualCluster": [], "admin": True,
                 "password": "fresh-one", "extension": {}}})
    assert status == 201
    _, bob = await api.call("GET", "/api/v2/users/bob")
    assert (bob["grouplist"], bob["admin"], bob["email"]) == (["default", "admingroup"], True, "b@example.com")
    assert await api.login("bob", "fresh-one")


async def test_admins_cannot_be_deleted_and_the_last_admin_stays(api: Api) -> None:
    status, answer = await api.call("DELETE", "/api/v2/users/admin")
    assert (status, answer["code"]) == (403, "RemoveAdminError")
    status, answer = await api.call("PUT", "/api/v2/users/admin/admin", json_body={"admin": False})
    assert (status, answer["code"]) == (403, "ForbiddenUserError") and "no admin" in answer["message"]
    await create(api, "root", admin=True)
    status, _ = await api.call("PUT", "/api/v2/users/admin/admin", token=await api.login(),
                               json_body={"admin": False})
    assert status == 201
    status, answer = await api.call("POST", "/api/v2/users", json_body={"username": "x1", "password": "secret1"})
    assert (status, answer["code"]) == (403, "ForbiddenUserError")  # the same token, no longer an admin's


async def test_deleting_a_user_ends_their_tokens_and_keeps_their_jobs(api: Api) -> None:
    bob = await create(api, "bob")
    assert (await submit(api, bob, "j1"))[0] == 202
    status, answer = await api.call("DELETE", "/api/v2/users/bob", token=await api.login())
    assert (status, answer) == (200, {"message": "user is removed successfully"})
    assert (await api.call("GET", "/api/v2/users", token=bob))[0] == 401
    status, answer = await api.call("GET", "/api/v2/users/bob")
    assert (status, answer["code"]) == (400, "NoUserError")
    status, answer = await api.call("DELETE", "/api/v2/users/bob")
    assert (status, answer["code"]) == (404, "NoUserError")
    assert await jobs_of(api, "bob") == ["j1"]


async def test_application_tokens_cannot_change_users(api: Api) -> None:
    status, app = await api.call("POST", "/api/v2/tokens/application")
    status, answer = await api.call("POST", "/api/v2/users", token=app["token"],
                                    json_body={"username": "eve", "password": "secret1"})
    assert (status, answer["code"]) == (403, "ForbiddenUserError") and "Applications" in answer["message"]


@pytest.mark.parametrize("readable_by_all", [True, False])
async def test_who_reads_whose_jobs(api: Api, readable_by_all: bool) -> None:
    from pai.launcher import cluster
    from pai.rest_server.keys import LAUNCHER

    await api.write(lambda s: cluster.apply_file(s, {"access": {"jobsReadableByAll": readable_by_all}}, 0.0))
    api.client.app[LAUNCHER].clusters.invalidate()
    bob, carol = await create(api, "bob"), await create(api, "carol")
    assert (await submit(api, bob, "b1"))[0] == 202
    assert (await submit(api, carol, "c1"))[0] == 202
    _, listed = await api.call("GET", "/api/v2/jobs", token=bob)
    assert sorted(j["name"] for j in listed) == (["b1", "c1"] if readable_by_all else ["b1"])
    for path in ("/api/v2/jobs?username=carol", "/api/v2/jobs/carol~c1", "/api/v2/jobs/carol~c1/config",
                 "/api/v2/jobs/carol~c1/attempts"):
        status, answer = await api.call("GET", path, token=bob)
        assert status == (200 if readable_by_all else 403), (path, answer)
    assert (await api.call("GET", "/api/v2/jobs/bob~b1", token=bob))[0] == 200
    assert sorted(await jobs_of(api, "carol")) == ["c1"]  # the admin reads everyone's
    _, everything = await api.call("GET", "/api/v2/jobs", token=await api.login())
    assert sorted(j["name"] for j in everything) == ["b1", "c1"]
