"""Storages over REST: OpenPAI's listing per user, and submissions that mount them (or are refused with 400)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from sqlalchemy.orm import Session

from pai.domain.errors import InvalidParametersError
from pai.launcher import cluster
from pai.launcher.service import Launcher
from pai.rest_server.keys import LAUNCHER
from pai.store import jobs as store_jobs
from pai.store import users
from tests.rest_server.conftest import Api

STORAGES: list[dict[str, Any]] = [
    {"name": "shared", "path": "/nfs/shared", "default": True},
    {"name": "datasets", "path": "/nfs/datasets", "readOnly": True},
    {"name": "vision", "path": "/nfs/vision", "groups": ["vision"]},
]


@pytest.fixture
async def with_storages(api: Api) -> Api:
    def storages_and_bob(s: Session) -> None:
        cluster.apply_file(s, {"storages": STORAGES}, 0.0)
        users.create_user(s, "bob", "bob-password")

    await api.write(storages_and_bob)
    return api


def job(name: str, extras: dict[str, Any]) -> str:
    return yaml.safe_dump({
        "protocolVersion": 2, "name": name, "type": "job",
        "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "busybox"}],
        "taskRoles": {"w": {"dockerImage": "img", "commands": ["ls /mnt"],
                            "resourcePerInstance": {"cpu": 1, "memoryMB": 128, "gpu": 0}}},
        "extras": extras,
    })


async def submit(api: Api, name: str, extras: dict[str, Any]) -> tuple[int, Any]:
    return await api.call("POST", "/api/v2/jobs", body=job(name, extras), content_type="text/yaml")


async def test_users_list_the_storages_their_groups_may_mount(with_storages: Api) -> None:
    api = with_storages
    status, body = await api.call("GET", "/api/v2/storages")
    assert status == 200 and [s["name"] for s in body["storages"]] == ["datasets", "shared", "vision"]  # admin
    await api.login("bob", "bob-password")
    status, body = await api.call("GET", "/api/v2/storages")
    assert status == 200
    assert body["storages"] == [
        {"name": "datasets", "share": True, "volumeName": "datasets", "default": False, "readOnly": True},
        {"name": "shared", "share": True, "volumeName": "shared", "default": True, "readOnly": False},
    ]
    status, detail = await api.call("GET", "/api/v2/storages/datasets")
    assert status == 200 and detail["data"] == {"path": "/nfs/datasets"} and detail["readOnly"] is True
    for name in ("vision", "nope"):  # another group's storage is not there for bob
        status, body = await api.call("GET", f"/api/v2/storages/{name}")
        assert (status, body["code"]) == (404, "NoStorageError") and name in body["message"]


async def test_allowed_storages_are_resolved_into_the_job(with_storages: Api) -> None:
    api = with_storages
    await api.login("bob", "bob-password")
    extras = {"storages": [{"name": "datasets", "mountPath": "/data"}],
              "com.microsoft.pai.runtimeplugin": [{"plugin": "teamwise_storage"}]}
    status, body = await submit(api, "mounts", extras)
    assert status == 202, body
    launcher: Launcher = api.client.app[LAUNCHER]
    with launcher.db.session() as s:
        spec = store_jobs.get_job(s, "bob~mounts").spec
    assert [(m.name, m.mount_path, m.host_path, m.read_only) for m in spec.storages] == [
        ("datasets", "/data", "/nfs/datasets", True), ("shared", "/mnt/shared", "/nfs/shared", False)]


@pytest.mark.parametrize(("extras", "field", "says"), [
    pytest.param({"storages": [{"name": "vision"}]}, "extras.storages[0].name", "user bob may not use storage 'vision'",
                 id="another group's storage"),
    pytest.param({"com.microsoft.pai.runtimeplugin": [
        {"plugin": "teamwise_storage", "parameters": {"storageConfigNames": ["shared", "vision"]}}]},
        "extras.com.microsoft.pai.runtimeplugin[0].parameters.storageConfigNames[1]", "may not use storage 'vision'",
        id="teamwise plugin naming another group's storage"),
    pytest.param({"storages": [{"name": "nope"}]}, "extras.storages[0].name", "'nope' is not a storage",
                 id="unknown storage"),
    pytest.param({"storages": [{"name": "shared", "mountPath": "/pai/code"}]}, "extras.storages[0].mountPath",
                 "reserved for the platform", id="mount over the platform's paths"),
    pytest.param({"storages": [{"name": "shared", "mountPath": "/x"}, {"name": "datasets", "mountPath": "/x"}]},
                 "extras.storages[1].mountPath", "already the mount path", id="two storages at one path"),
])
async def test_refused_storages_are_400_naming_the_field_and_store_nothing(
        with_storages: Api, extras: dict[str, Any], field: str, says: str) -> None:
    api = with_storages
    await api.login("bob", "bob-password")
    status, body = await submit(api, "refused", extras)
    assert status == 400 and body["code"] == "InvalidParametersError"
    assert body["message"].startswith(field + ": ") and says in body["message"]
    status, jobs = await api.call("GET", "/api/v2/jobs")
    assert status == 200 and jobs == []


async def test_a_storage_listed_twice_in_the_configuration_is_refused(api: Api) -> None:
    with pytest.raises(InvalidParametersError, match="listed twice"):
        await api.write(lambda s: cluster.apply_file(s, {"storages": [STORAGES[0], STORAGES[0]]}, 0.0))
