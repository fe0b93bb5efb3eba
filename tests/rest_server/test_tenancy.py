"""Where users read their own jobs only (``access.jobsReadableByAll: false``), no answer names another user's job:
not the node list (their tasks are only counted), not the history of a job they preempted, not a waiting reason.
Admins, and everyone where jobs are readable by all, see every name."""

from __future__ import annotations

from typing import Any

import pytest

from pai.launcher import cluster
from pai.launcher.access import OTHER_USERS_JOB, hide_other_users_jobs
from pai.rest_server.keys import LAUNCHER
from pai.store.records import User
from tests.eventually import eventually
from tests.rest_server.conftest import Api
from tests.rest_server.test_users import create
from tests.rest_server.test_vcs import add_node, job


async def private(api: Api, readable_by_all: bool = False) -> None:
    """Jobs private to their owners (or readable by all): written on the app's writer thread (``Api.write``)."""
    await api.write(lambda s: cluster.apply_file(s, {"access": {"jobsReadableByAll": readable_by_all}}, 0.0))
    api.client.app[LAUNCHER].clusters.invalidate()


async def submit(api: Api, token: str, name: str, gpu: int, priority: str | None = None) -> None:
    status, body = await api.call("POST", "/api/v2/jobs", body=job(name, gpu=gpu, priority=priority),
                                  content_type="application/json", token=token)
    assert status == 202, body


async def tasks_on_node(api: Api, token: str) -> dict[str, Any] | None:
    _, nodes = await api.call("GET", "/api/v2/nodes", token=token)
    (node,) = nodes
    return node if len(node["tasks"]) + node["otherUsersTasks"] == 2 else None


@pytest.mark.parametrize(("readable_by_all", "bob_sees", "bob_counts"), [
    pytest.param(False, ["bob~b"], 1, id="private jobs: bob sees his own task and counts carol's"),
    pytest.param(True, ["bob~b", "carol~c"], 0, id="readable by all: bob sees both"),
])
async def test_the_node_list_names_other_users_tasks_only_to_who_may_read_them(
    api: Api, readable_by_all: bool, bob_sees: list[str], bob_counts: int
) -> None:
    await private(api, readable_by_all)
    await add_node(api, gpu=4)
    bob, carol = await create(api, "bob"), await create(api, "carol")
    await submit(api, bob, "b", gpu=1)
    await submit(api, carol, "c", gpu=2)
    node = await eventually(lambda: tasks_on_node(api, bob), what="both jobs placed on the node")
    assert sorted(t["job"] for t in node["tasks"]) == bob_sees and node["otherUsersTasks"] == bob_counts
    assert node["used"]["gpu"] == 3 and len(node["usedGpus"]) == 3  # what is used is no secret
    admin_token = await api.login()
    admin = await eventually(lambda: tasks_on_node(api, admin_token), what="the admin's view")
    assert sorted(t["job"] for t in admin["tasks"]) == ["bob~b", "carol~c"] and admin["otherUsersTasks"] == 0


async def test_a_preempted_job_does_not_tell_its_owner_which_job_of_another_user_preempted_it(api: Api) -> None:
    await private(api)
    await add_node(api, gpu=4)
    bob, carol = await create(api, "bob"), await create(api, "carol")
    await submit(api, bob, "low", gpu=4)

    async def state(token: str, key: str) -> str:
        return str((await api.call("GET", f"/api/v2/jobs/{key}", token=token))[1]["jobStatus"]["state"])

    await eventually(lambda: _is(state(bob, "bob~low"), "RUNNING"), what="bob~low admitted")
    await submit(api, carol, "high", gpu=4, priority="prod")  # preempts bob~low within the VC

    async def preempted(token: str) -> list[dict[str, Any]]:
        _, events = await api.call("GET", "/api/v2/jobs/bob~low/events", token=token)
        return [e for e in events["data"] if e["reason"] == "preempted"]

    admin_token = await api.login()
    admin_view = await eventually(lambda: preempted(admin_token), what="bob~low's preemption in its history")
    assert "carol~high" in str(admin_view)  # admins see who preempted whom
    bob_view = await preempted(bob)
    assert bob_view and "carol~high" not in str(bob_view) and OTHER_USERS_JOB in str(bob_view)
    _, detail = await api.call("GET", "/api/v2/jobs/bob~low", token=bob)
    assert "carol~high" not in str(detail)


async def _is(value: Any, wanted: str) -> bool:
    return bool(await value == wanted)


ALICE = User(name="alice", admin=False)


@pytest.mark.parametrize(("text", "hidden"), [
    pytest.param("preempted by bob~train under rule withinVc", "preempted by another user's job under rule withinVc",
                 id="another user's job in a message"),
    pytest.param("alice~mine waits", "alice~mine waits", id="the reader's own job stays"),
    pytest.param("bob~a.b-c_1 and carol~x", "another user's job and another user's job", id="several, any name"),
    pytest.param("cd ~/data; x~", "cd ~/data; x~", id="a tilde that is no job key"),
    pytest.param("malice~x", "another user's job", id="a user whose name ends in the reader's"),
])
def test_job_keys_of_others_are_hidden_in_any_text(text: str, hidden: str) -> None:
    assert hide_other_users_jobs({"m": [text]}, ALICE, False) == {"m": [hidden]}
    assert hide_other_users_jobs({"m": [text]}, ALICE, True) == {"m": [text]}
    assert hide_other_users_jobs({"m": [text]}, User(name="root", admin=True), False) == {"m": [text]}
