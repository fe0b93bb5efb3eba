"""Virtual clusters over REST: OpenPAI's admin form, our form, status, deletion, reports, priorities."""

from __future__ import annotations

import json

import pytest

from pai.store import users
from tests.rest_server.conftest import AGENT_TOKEN, Api


async def add_node(api: Api, name: str = "n1", gpu: int = 8, cpu: int = 16) -> None:
    reg = {"version": 1, "node": {"name": name, "address": "127.0.0.9",
                                  "resources": {"gpu": gpu, "cpu": cpu, "memoryMB": 65536}}}
    status, _ = await api.call("POST", "/api/internal/agents/register", json_body=reg, token=AGENT_TOKEN)
    assert status == 200


def job(name: str, vc: str = "default", gpu: int = 0, priority: str | None = None) -> str:
    spec: dict[str, object] = {"jobName": name, "image": "busybox", "virtualCluster": vc, "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": gpu, "command": "true"}]}
    if priority:
        spec["extras"] = {"hivedScheduler": {"jobPriorityClass": priority}}
    return json.dumps(spec)


async def test_default_vc_holds_the_whole_cluster(api: Api) -> None:
    await add_node(api)
    status, body = await api.call("GET", "/api/v2/virtual-clusters")
    assert status == 200 and list(body) == ["default"]
    d = body["default"]
    assert (d["capacity"], d["maxCapacity"], d["status"]) == (100.0, 100.0, "running")
    assert d["resourcesTotal"] == {"gpu": 8, "cpu": 16, "memoryMB": 65536, "memory": 65536, "vCores": 16, "GPUs": 8}
    assert d["dedicated"] is False


async def test_openpai_v2_put_body_creates_the_vc_and_its_group(api: Api) -> None:
    await add_node(api)
    body = {"vcCapacity": 50, "vcMaxCapacity": 75, "description": "the dev team", "externalName": "cn=dev"}
    status, answer = await api.call("PUT", "/api/v2/virtual-clusters/dev", json_body=body)
    assert (status, answer["message"]) == (201, "Create virtual cluster dev to capacity 50 successfully.")
    _, vc = await api.call("GET", "/api/v2/virtual-clusters/dev")
    assert (vc["capacity"], vc["maxCapacity"]) == (50.0, 75.0)
    assert {k: vc["resourcesTotal"][k] for k in ("cpu", "memory", "gpu")} == {"cpu": 8, "memory": 32768, "gpu": 4}
    assert vc["resourcesCluster"]["gpu"] == 8 and vc["resourcesUsed"]["GPUs"] == 0
    _, group = await api.call("GET", "/api/v2/groups/dev")
    assert (group["description"], group["externalName"]) == ("the dev team", "cn=dev")
    status, answer = await api.call("PUT", "/api/v2/virtual-clusters/dev", json_body={"vcCapacity": 25})
    assert (status, answer["message"]) == (201, "Update virtual cluster dev to capacity 25 successfully.")
    _, group = await api.call("GET", "/api/v2/groups/dev")
    assert group["description"] == "the dev team"


async def test_sku_types_per_gpu_type(api: Api) -> None:
    for name, gpu_type, gpu, cpu in (("a", "V100", 8, 32), ("b", "V100", 4, 24), ("c", "K80", 2, 8), ("d", None, 0, 4)):
        reg = {"version": 1, "node": {"name": name, "address": "127.0.0.9", "gpuType": gpu_type,
                                      "resources": {"gpu": gpu, "cpu": cpu, "memoryMB": 65536}}}
        status, _ = await api.call("POST", "/api/internal/agents/register", json_body=reg, token=AGENT_TOKEN)
        assert status == 200
    status, skus = await api.call("GET", "/api/v2/cluster/sku-types")
    assert status == 200
    assert skus == {"K80": {"cpu": 4, "memory": 32768, "gpu": 1}, "V100": {"cpu": 4, "memory": 8192, "gpu": 1}}
    for path in ("/api/v2/cluster/sku-types?vc=default", "/api/v2/virtual-clusters/default/sku-types"):
        status, same = await api.call("GET", path)
        assert (status, same) == (200, skus)
    for path in ("/api/v2/cluster/sku-types?vc=nope", "/api/v2/virtual-clusters/nope/sku-types"):
        status, body = await api.call("GET", path)
        assert (status, body["code"]) == (404, "NoVirtualClusterError")


async def test_openpai_v1_put_then_report_and_rest_goes_to_default(api: Api) -> None:
    await add_node(api)
    status, body = await api.call("PUT", "/api/v1/virtual-clusters/dev",
                                  json_body={"vcCapacity": 25, "vcMaxCapacity": 50})
    assert status == 201, body
    status, body = await api.call("GET", "/api/v2/virtual-clusters")
    assert body["dev"]["capacity"] == 25.0 and body["dev"]["maxCapacity"] == 50.0
    assert body["dev"]["resourcesGuaranteed"]["gpu"] == 2 and body["dev"]["resourcesMax"]["gpu"] == 4
    assert body["default"]["capacity"] == 75.0
    status, one = await api.call("GET", "/api/v1/virtual-clusters/dev")
    assert status == 200 and one["name"] == "dev"


async def test_v2_form_with_policies(api: Api) -> None:
    await add_node(api)
    spec = {"guaranteed": {"gpu": 4}, "max": {"gpu": "75%"}, "preemption": {"reclaim": "LowerPriority"},
            "strictFifo": True}
    status, body = await api.call("PUT", "/api/v2/virtual-clusters/research", json_body=spec)
    assert status == 201, body
    _, vc = await api.call("GET", "/api/v2/virtual-clusters/research")
    assert vc["resourcesGuaranteed"]["gpu"] == 4 and vc["resourcesMax"]["gpu"] == 6
    assert vc["preemption"]["reclaim"] == "LowerPriority" and vc["strictFifo"] is True


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/api/v1/virtual-clusters/x", {"vcCapacity": 120}, "vcCapacity"),
    ("/api/v2/virtual-clusters/x", {"vcCapacity": 50, "vcMaxCapacity": 10}, "vcMaxCapacity"),
    ("/api/v2/virtual-clusters/x", {"vcCapacity": 50, "description": 7}, "description"),
    ("/api/v1/virtual-clusters/x", {"vcCapacity": 50, "vcMaxCapacity": 10}, "vcMaxCapacity"),
    ("/api/v2/virtual-clusters/x", {"guaranteed": {"gpu": "lots"}}, "guaranteed.gpu"),
    ("/api/v2/virtual-clusters/x", {"name": "y"}, "name"),
    ("/api/v2/virtual-clusters/x", {"guaranteed": {"gpu": 9}}, "guarantee"),
])
async def test_invalid_vc_changes_are_400_and_change_nothing(api: Api, path: str, body: dict, field: str) -> None:
    await add_node(api)
    status, resp = await api.call("PUT", path, json_body=body)
    assert status == 400 and resp["code"] == "InvalidParametersError", resp
    assert field in resp["message"]
    _, vcs = await api.call("GET", "/api/v2/virtual-clusters")
    assert list(vcs) == ["default"]


async def test_only_admins_change_vcs(api: Api) -> None:
    await api.write(lambda s: users.create_user(s, "bob", "bob-password"))
    await api.login("bob", "bob-password")
    status, body = await api.call("PUT", "/api/v1/virtual-clusters/dev", json_body={"vcCapacity": 10})
    assert status == 403 and body["code"] == "ForbiddenUserError"
    status, _ = await api.call("GET", "/api/v2/virtual-clusters")
    assert status == 200


async def test_stopped_vc_refuses_submissions_and_deletion_needs_no_active_jobs(api: Api) -> None:
    await add_node(api, cpu=0)  # nothing can run: jobs stay waiting
    await api.call("PUT", "/api/v1/virtual-clusters/dev", json_body={"vcCapacity": 50})
    status, _ = await api.call("POST", "/api/v2/jobs", body=job("a", "dev"), content_type="application/json")
    assert status == 202
    status, body = await api.call("DELETE", "/api/v1/virtual-clusters/dev")
    assert status == 409 and body["code"] == "ConflictVirtualClusterError"
    status, _ = await api.call("PUT", "/api/v1/virtual-clusters/dev/status", json_body={"vcStatus": "stopped"})
    assert status == 201
    status, body = await api.call("POST", "/api/v2/jobs", body=job("b", "dev"), content_type="application/json")
    assert status == 400 and "stopped" in body["message"]
    await api.call("PUT", "/api/v2/jobs/admin~a/executionType", json_body={"value": "STOP"})
    status, _ = await api.call("DELETE", "/api/v1/virtual-clusters/dev")
    assert status == 200
    status, body = await api.call("DELETE", "/api/v1/virtual-clusters/default")
    assert status == 400


async def test_waiting_job_of_a_stopped_vc_says_so(api: Api) -> None:
    import asyncio

    await add_node(api)
    await api.call("PUT", "/api/v1/virtual-clusters/dev", json_body={"vcCapacity": 50})
    await api.call("PUT", "/api/v1/virtual-clusters/dev/status", json_body={"vcStatus": "draining"})
    await api.call("PUT", "/api/v1/virtual-clusters/dev/status", json_body={"vcStatus": "stopped"})
    await api.call("PUT", "/api/v1/virtual-clusters/dev/status", json_body={"vcStatus": "running"})
    await api.call("POST", "/api/v2/jobs", body=job("a", "dev", gpu=9), content_type="application/json")
    await api.call("PUT", "/api/v1/virtual-clusters/dev/status", json_body={"vcStatus": "stopped"})
    for _ in range(100):
        _, detail = await api.call("GET", "/api/v2/jobs/admin~a")
        reason = detail["jobStatus"]["waitingReason"]
        if reason and reason["code"] == "VcStopped":
            break
        await asyncio.sleep(0.05)
    assert reason["code"] == "VcStopped" and "dev" in reason["message"]


async def test_priority_classes_and_changes(api: Api) -> None:
    status, body = await api.call("POST", "/api/v2/jobs", body=job("p", priority="prod"),
                                  content_type="application/json")
    assert status == 202
    _, summary = await api.call("GET", "/api/v2/jobs")
    assert summary[0]["priority"] == 100
    status, body = await api.call("PUT", "/api/v2/jobs/admin~p/priority", json_body={"value": "oppo"})
    assert status == 202
    _, detail = await api.call("GET", "/api/v2/jobs/admin~p")
    assert detail["jobStatus"]["priority"] == -1
    assert detail["events"][-1]["kind"] == "priority-changed"
    status, body = await api.call("PUT", "/api/v2/jobs/admin~p/priority", json_body={"value": "crit"})
    assert status == 400 and "crit" in body["message"]
    status, body = await api.call("POST", "/api/v2/jobs", body=job("q", priority="crit"),
                                  content_type="application/json")
    assert status == 400 and body["code"] == "InvalidProtocolError"


async def test_openpai_capacity_change_keeps_the_rest_of_the_definition(api: Api) -> None:
    await add_node(api)
    await api.call("PUT", "/api/v2/virtual-clusters/dev",
                   json_body={"guaranteed": {"gpu": 2}, "preemption": {"reclaim": "Never"}, "strictFifo": True})
    status, _ = await api.call("PUT", "/api/v1/virtual-clusters/dev", json_body={"vcCapacity": 50})
    assert status == 201
    _, vc = await api.call("GET", "/api/v2/virtual-clusters/dev")
    assert vc["capacity"] == 50.0 and vc["preemption"]["reclaim"] == "Never" and vc["strictFifo"] is True


async def test_config_stays_readable_after_its_priority_class_is_gone(api: Api) -> None:
    await api.apply_config({"priorityClasses": {"crit": 200}})
    status, _ = await api.call("POST", "/api/v2/jobs", body=job("c", priority="crit"), content_type="application/json")
    assert status == 202
    await api.apply_config({"priorityClasses": {}})
    status, config = await api.call("GET", "/api/v2/jobs/admin~c/config")
    assert status == 200 and config["extras"]["hivedScheduler"]["jobPriorityClass"] == "crit"


@pytest.mark.parametrize(("body", "message"), [
    pytest.param({}, "vcStatus: is required, one of running, stopped, draining", id="missing"),
    pytest.param({"vcStatus": "paused"}, "vcStatus: 'paused' is not one of running, stopped, draining", id="unknown"),
])
async def test_a_vc_status_change_names_the_rule(api: Api, body: dict[str, str], message: str) -> None:
    await api.call("PUT", "/api/v1/virtual-clusters/dev", json_body={"vcCapacity": 50})
    status, answer = await api.call("PUT", "/api/v2/virtual-clusters/dev/status", json_body=body)
    assert (status, answer) == (400, {"code": "InvalidParametersError", "message": message})
    _, vc = await api.call("GET", "/api/v2/virtual-clusters/dev")
    assert vc["status"] == "running"
