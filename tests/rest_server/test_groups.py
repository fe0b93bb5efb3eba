"""OpenPAI's group API over HTTP, and the groups that come and go with VCs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.rest_server.conftest import Api
from tests.rest_server.test_users import add_vc, create, submit


async def group(api: Api, name: str) -> Any:
    status, body = await api.call("GET", f"/api/v2/groups/{name}")
    assert status == 200, body
    return body


async def test_built_in_groups_and_their_shape(api: Api) -> None:
    status, body = await api.call("GET", "/api/v2/groups")
    assert status == 200
    assert {g["groupname"]: g["extension"] for g in body} == {
        "admingroup": {"acls": {"admin": True}}, "default": {"acls": {"virtualClusters": ["default"]}}}
    assert set(body[0]) == {"groupname", "description", "externalName", "extension"}


async def test_create_update_and_delete(api: Api) -> None:
    status, answer = await api.call("POST", "/api/v2/groups", json_body={
        "groupname": "team", "description": "d", "externalName": "ext", "extension": {"k": 1}})
    assert (status, answer) == (201, {"message": "group is created successfully"})
    status, answer = await api.call("POST", "/api/v2/groups", json_body={"groupname": "team"})
    assert (status, answer["code"]) == (409, "ConflictGroupError")
    status, _ = await api.call("PUT", "/api/v2/groups", json_body={
        "patch": True, "data": {"groupname": "team", "extension": {"j": 2}}})
    assert status == 201
    assert await group(api, "team") == {"groupname": "team", "description": "d", "externalName": "ext",
                                         "extension": {"k": 1, "j": 2}}
    status, _ = await api.call("PUT", "/api/v2/groups", json_body={
        "data": {"groupname": "team", "description": "new", "externalName": "", "extension": {}}})
    assert status == 201
    assert await group(api, "team") == {"groupname": "team", "description": "new", "externalName": "",
                                         "extension": {}}
    for path, body in (("description", {"description": "x"}), ("externalname", {"externalName": "y"}),
                       ("extension", {"extension": {"a": 1}}), ("extension/acls/storageConfigs", {"data": ["s"]})):
        status, _ = await api.call("PUT", f"/api/v2/groups/team/{path}", json_body=body)
        assert status == 201, path
    assert await group(api, "team") == {"groupname": "team", "description": "x", "externalName": "y",
                                         "extension": {"a": 1, "acls": {"storageConfigs": ["s"]}}}
    status, answer = await api.call("DELETE", "/api/v2/groups/team")
    assert (status, answer) == (200, {"message": "group is removed successfully"})
    status, answer = await api.call("GET", "/api/v2/groups/team")
    assert (status, answer["code"]) == (400, "NoGroupError")


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code", "mentions"),
    [
        pytest.param("POST", "/api/v2/groups", {"groupname": "a b"}, 400, "InvalidParametersError", "groupname",
                     id="name with a space"),
        pytest.param("PUT", "/api/v2/groups", {"data": {"groupname": "default"}}, 400, "InvalidParametersError",
                     "description", id="a whole update without every field"),
        pytest.param("PUT", "/api/v2/groups", {"patch": True, "data": {"groupname": "ghost"}}, 400, "NoGroupError",
                     "ghost", id="update of no group"),
        pytest.param("PUT", "/api/v2/groups/ghost/description", {"description": "x"}, 400, "NoGroupError",
                     "ghost", id="description of no group"),
        pytest.param("DELETE", "/api/v2/groups/ghost", None, 404, "NoGroupError", "ghost", id="delete no group"),
        pytest.param("DELETE", "/api/v2/groups/admingroup", None, 403, "ForbiddenUserError", "built in",
                     id="delete the admins' group"),
        pytest.param("PUT", "/api/v2/users/admin/group", {"groupname": "ghost"}, 404, "NoGroupError", "ghost",
                     id="join no group"),
        pytest.param("PUT", "/api/v2/users/admin/grouplist", {"grouplist": ["admingroup", "ghost"]}, 404,
                     "NoGroupError", "ghost", id="regroup into no group"),
    ],
)
async def test_bad_group_requests(api: Api, method: str, path: str, body: Any, status: int, code: str,
                                  mentions: str) -> None:
    _, before = await api.call("GET", "/api/v2/groups")
    got, answer = await api.call(method, path, json_body=body)
    assert (got, answer["code"]) == (status, code) and mentions in answer["message"], answer
    assert (await api.call("GET", "/api/v2/groups"))[1] == before
    _, admin = await api.call("GET", "/api/v2/users/admin")
    assert admin["grouplist"] == ["default", "admingroup"]


async def test_a_vc_brings_its_group_and_takes_it_away(api: Api) -> None:
    await add_vc(api, "dev")
    assert (await group(api, "dev"))["extension"] == {"acls": {"virtualClusters": ["dev"]}}
    bob = await create(api, "bob", virtualCluster=["dev"])
    assert (await submit(api, bob, "j1", "dev"))[0] == 202
    await api.call("PUT", "/api/v2/jobs/bob~j1/executionType", json_body={"value": "STOP"}, token=bob)
    status, _ = await api.call("DELETE", "/api/v2/virtual-clusters/dev", token=await api.login())
    assert status == 200
    assert (await api.call("GET", "/api/v2/groups/dev"))[0] == 400
    _, me = await api.call("GET", "/api/v2/users/bob")
    assert me["grouplist"] == ["default"] and me["virtualCluster"] == ["default"]


async def test_storages_granted_by_a_group(api: Api, tmp_path: Any) -> None:
    """A storage limited to some groups is also mountable by a group whose acls.storageConfigs names it."""
    from pai.launcher import cluster

    await api.write(lambda s: cluster.apply_file(
        s, {"storages": [{"name": "nfs", "path": str(tmp_path), "groups": ["ops"]}]}, 0.0))
    bob = await create(api, "bob")
    assert (await api.call("GET", "/api/v2/storages", token=bob))[1]["storages"] == []
    await api.call("POST", "/api/v2/groups", token=await api.login(),
                   json_body={"groupname": "readers", "extension": {"acls": {"storageConfigs": ["nfs"]}}})
    await api.call("PUT", "/api/v2/users/bob/group", json_body={"groupname": "readers"})
    status, listed = await api.call("GET", "/api/v2/storages", token=bob)
    assert status == 200 and [st["name"] for st in listed["storages"]] == ["nfs"]
    _, me = await api.call("GET", "/api/v2/users/bob")
    assert me["storageConfig"] == ["nfs"]
