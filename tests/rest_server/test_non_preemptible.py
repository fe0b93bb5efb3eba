"""``extras.preemptible: false`` over REST: accepted for a user the cluster configuration grants it, refused with
OpenPAI's ``{code, message}`` (naming the field and the rule) for anyone else, and nothing stored."""

from __future__ import annotations

from typing import Any

import yaml

from tests.rest_server.conftest import Api
from tests.rest_server.test_users import create, jobs_of

JOB = """protocolVersion: 2
name: {name}
type: job
prerequisites:
  - {{type: dockerimage, name: img, uri: busybox}}
taskRoles:
  w:
    instances: 1
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
    commands: ['true']
extras:
  preemptible: {preemptible}
  hivedScheduler: {{jobPriorityClass: {priority}}}
"""


async def submit(api: Api, token: str, name: str, *, preemptible: bool = False, priority: str = "test"
                 ) -> tuple[int, Any]:
    body = JOB.format(name=name, preemptible=str(preemptible).lower(), priority=priority)
    return await api.call("POST", "/api/v2/jobs", body=body, content_type="text/yaml", token=token)


async def test_a_v2_job_with_extras_preemptible_false_is_accepted_for_a_permitted_user_and_refused_otherwise(
        api: Api) -> None:
    await api.apply_config({"nonPreemptible": {"users": ["alice"], "priorityClasses": ["prod"]}})
    alice, bob = await create(api, "alice"), await create(api, "bob")

    status, body = await submit(api, alice, "svc")
    assert (status, body["jobName"]) == (202, "alice~svc")
    status, config = await api.call("GET", "/api/v2/jobs/alice~svc/config", token=alice)
    assert status == 200 and yaml.safe_load(config)["extras"]["preemptible"] is False

    status, body = await submit(api, bob, "svc")
    assert (status, body) == (403, {
        "code": "ForbiddenUserError",
        "message": "extras.preemptible: user bob may not submit a non-preemptible job of priority class 'test' "
                   "(the cluster's nonPreemptible allows admins; priority classes prod; users alice)",
        "line": 13})  # where the document says preemptible: false
    assert await jobs_of(api, "bob") == []

    assert (await submit(api, bob, "prod-svc", priority="prod"))[0] == 202  # granted with the class
    assert (await submit(api, bob, "batch", preemptible=True))[0] == 202  # asks for nothing
    assert (await submit(api, await api.login(), "admins-svc"))[0] == 202  # admins always may
    assert sorted(await jobs_of(api, "bob")) == ["batch", "prod-svc"]


async def test_extras_preemptible_must_be_a_boolean(api: Api) -> None:
    body = JOB.format(name="svc", preemptible="'no'", priority="test")
    status, answer = await api.call("POST", "/api/v2/jobs", body=body, content_type="text/yaml")
    assert status == 400 and answer["code"] == "InvalidProtocolError"
    assert answer["message"].startswith("extras.preemptible: ")
