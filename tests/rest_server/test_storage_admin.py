"""An admin's storage writes (``PUT`` / ``DELETE /api/v2/storages/{name}``): checked as the configuration file is,
nothing stored on bad input, refused (403) to anyone else, and what they store is what submissions mount."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session

from pai.store import users
from tests.rest_server.conftest import Api
from tests.rest_server.test_storages import STORAGES, submit


@pytest.fixture
async def admin_and_bob(api: Api) -> Api:
    await api.apply_config({"storages": STORAGES})

    def bob(s: Session) -> None:
        users.create_user(s, "bob", "bob-password")

    await api.write(bob)
    return api


async def details(api: Api) -> dict[str, Any]:
    """Every storage with its path and groups, as the admin reads them."""
    status, body = await api.call("GET", "/api/v2/storages")
    assert status == 200
    out = {}
    for st in body["storages"]:
        status, detail = await api.call("GET", f"/api/v2/storages/{st['name']}")
        assert status == 200
        out[st["name"]] = detail
    return out


async def test_an_admin_creates_replaces_and_removes_a_storage(admin_and_bob: Api) -> None:
    api = admin_and_bob
    status, body = await api.call("PUT", "/api/v2/storages/scratch", json_body={"path": "/nfs/scratch"})
    assert (status, body) == (201, {"message": "create storage scratch successfully"})
    status, body = await api.call("PUT", "/api/v2/storages/scratch",
                                  json_body={"name": "scratch", "path": "/nfs/scratch2", "readOnly": True})
    assert (status, body) == (201, {"message": "update storage scratch successfully"})
    got = (await details(api))["scratch"]
    assert (got["data"], got["readOnly"], got["groups"], got["default"]) == ({"path": "/nfs/scratch2"}, True, [], False)

    await api.login("bob", "bob-password")  # what the admin stored is what a job mounts
    status, body = await submit(api, "uses-scratch", {"storages": [{"name": "scratch", "mountPath": "/s"}]})
    assert status == 202, body

    await api.login()
    status, body = await api.call("DELETE", "/api/v2/storages/scratch")
    assert (status, body) == (200, {"message": "remove storage scratch successfully"})
    assert sorted(await details(api)) == ["datasets", "shared", "vision"]
    status, body = await api.call("DELETE", "/api/v2/storages/scratch")
    assert (status, body["code"]) == (404, "NoStorageError") and "scratch" in body["message"]


@pytest.mark.parametrize(("url", "body", "field", "says"), [
    pytest.param("/api/v2/storages/bad", {"path": "nfs/relative"}, "path", "does not match", id="relative path"),
    pytest.param("/api/v2/storages/bad", {}, "path", "required", id="no path"),
    pytest.param("/api/v2/storages/bad", {"path": "/x", "size": 3}, "size", "not allowed", id="unknown field"),
    pytest.param("/api/v2/storages/bad", {"path": "/x", "groups": "dev"}, "groups", "array", id="groups not a list"),
    pytest.param("/api/v2/storages/bad", {"name": "other", "path": "/x"}, "name", "the path 'bad'",
                 id="another name in the body"),
    pytest.param("/api/v2/storages/no%20spaces", {"path": "/x"}, "name", "does not match", id="bad name"),
    pytest.param("/api/v2/storages/shared", {"path": "/x", "readOnly": "yes"}, "readOnly", "boolean",
                 id="replacing with a bad field"),
])
async def test_bad_input_is_400_naming_the_field_and_stores_nothing(
        admin_and_bob: Api, url: str, body: dict[str, Any], field: str, says: str) -> None:
    api = admin_and_bob
    before = await details(api)
    status, answer = await api.call("PUT", url, json_body=body)
    assert (status, answer["code"]) == (400, "InvalidParametersError"), answer
    assert answer["message"].startswith(f"{field}: ") and says in answer["message"], answer["message"]
    assert await details(api) == before


async def test_a_body_that_is_not_a_json_object_is_400(admin_and_bob: Api) -> None:
    api = admin_and_bob
    status, answer = await api.call("PUT", "/api/v2/storages/x", body="[1]", content_type="application/json")
    assert (status, answer["code"]) == (400, "InvalidParametersError") and answer["message"].startswith("body: ")


async def test_anyone_but_an_admin_is_refused_and_nothing_changes(admin_and_bob: Api) -> None:
    api = admin_and_bob
    before = await details(api)
    await api.login("bob", "bob-password")
    for method, body in (("PUT", {"path": "/nfs/mine"}), ("PUT", b"not json"), ("DELETE", None)):
        status, answer = await api.call(method, "/api/v2/storages/shared", json_body=body if isinstance(body, dict)
                                        else None, body=body if isinstance(body, bytes) else None)
        assert (status, answer["code"]) == (403, "ForbiddenUserError"), answer
        assert "only admins change storages" in answer["message"]
    await api.login()
    assert await details(api) == before
