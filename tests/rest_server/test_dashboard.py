"""The dashboard as the master serves it (its files, types, caching and security headers; every module it imports
is served and ships as package data), and the API fields and endpoints its pages read: job counts by state, a
VC's usage history, the tasks and GPUs on each node, each waiting job's reason and place in the list."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from pai.launcher import cluster
from pai.rest_server.dashboard import CONTENT_TYPES, assets
from pai.rest_server.keys import LAUNCHER, STORE
from pai.store import users
from tests.eventually import eventually
from tests.rest_server.conftest import Api
from tests.rest_server.test_vcs import add_node, job

STATIC = Path(__file__).resolve().parents[2] / "pai" / "rest_server" / "dashboard" / "static"
IMPORT = re.compile(r"""(?:import|from)\s*(?:[^"';]*?\s*from\s*)?["']\./([\w.-]+)["']""")


async def test_the_page_and_its_modules_are_served_with_types_and_revalidation(api: Api) -> None:
    resp = await api.client.get("/")
    assert resp.status == 200 and resp.content_type == "text/html"
    assert '<script type="module" src="/dashboard/app.js">' in await resp.text()
    assert "default-src 'self'" in resp.headers["Content-Security-Policy"]
    assert resp.headers["Cache-Control"] == "no-cache" and resp.headers["X-Content-Type-Options"] == "nosniff"
    again = await api.client.get("/", headers={"If-None-Match": resp.headers["ETag"]})
    assert again.status == 304 and await again.read() == b""
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css"), ("favicon.svg", "image/svg+xml")):
        resp = await api.client.get(f"/dashboard/{name}")
        assert (resp.status, resp.content_type) == (200, kind), name
    for bad in ("/dashboard/nope.js", "/dashboard/..%2Fdashboard%2F__init__.py", "/dashboard/__init__.py"):
        resp = await api.client.get(bad)
        assert resp.status == 404 and (await resp.json())["code"] == "NotFoundError", bad


def test_every_module_the_page_loads_is_served_and_ships_in_the_wheel() -> None:
    served = assets()
    files = {p.name for p in STATIC.iterdir()}
    assert set(served) == files and all("." + f.rpartition(".")[2] in CONTENT_TYPES for f in files)
    wanted = {"app.js", "style.css", "favicon.svg"}
    for name in [n for n in files if n.endswith(".js")]:
        wanted |= set(IMPORT.findall((STATIC / name).read_text()))
    pages = re.findall(r'\[/\^[^,]+, "(\w+)"\]', (STATIC / "app.js").read_text())  # loaded by import(`./${page}.js`)
    assert set(pages) == {"cluster", "nodes", "vcs", "jobs", "job", "submit", "experiments", "experiment", "login",
                          "admin"}
    wanted |= {f"{p}.js" for p in pages}
    assert wanted <= files, f"imported but missing: {sorted(wanted - files)}"
    pyproject = tomllib.loads((STATIC.parents[3] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["pai.rest_server.dashboard"]
    assert all(any(fnmatch(f"static/{f}", p) for p in patterns) for f in files)


def private_with_bob(s: Session) -> None:
    """bob, a user who is no admin, on a cluster whose jobs only their owners (and admins) read."""
    users.create_user(s, "bob", "bob-password")
    cluster.apply_file(s, {"access": {"jobsReadableByAll": False}}, 0.0)


async def test_job_counts_are_by_state_and_only_the_callers_where_jobs_are_private(api: Api) -> None:
    for name in ("a", "b"):
        assert (await api.call("POST", "/api/v2/jobs", body=job(name), content_type="application/json"))[0] == 202
    assert (await api.call("PUT", "/api/v2/jobs/admin~b/executionType", json_body={"value": "STOP"}))[0] == 202
    status, body = await api.call("GET", "/api/v2/cluster/job-counts")
    assert status == 200 and body["total"] == 2
    assert body["byState"] == {"WAITING": 1, "RUNNING": 0, "STOPPING": 0, "STOPPED": 1, "SUCCEEDED": 0, "FAILED": 0}
    await api.write(private_with_bob)
    api.client.app[LAUNCHER].clusters.invalidate()
    await api.login("bob", "bob-password")
    assert (await api.call("GET", "/api/v2/cluster/job-counts"))[1]["total"] == 0


async def state_of(api: Api, key: str, state: str) -> bool:
    return bool((await api.call("GET", f"/api/v2/jobs/{key}"))[1]["jobStatus"]["state"] == state)


async def test_a_vcs_usage_history_holds_its_samples(api: Api) -> None:
    await add_node(api, gpu=4)
    await api.call("POST", "/api/v2/jobs", body=job("g", gpu=2), content_type="application/json")
    await eventually(lambda: state_of(api, "admin~g", "RUNNING"), what="admin~g admitted")
    await api.client.app[STORE].call(api.client.app[LAUNCHER].usage.sample)  # as the loop does, every minute
    status, body = await api.call("GET", "/api/v2/virtual-clusters/default/usage-history?hours=1")
    assert status == 200 and body["name"] == "default" and body["hours"] == 1
    (latest,) = body["samples"][-1:]
    assert latest["used"]["gpu"] == 2 and latest["guaranteed"]["gpu"] == 4 and latest["max"]["gpu"] == 4
    assert latest["runningJobs"] == 1 and latest["waitingJobs"] == 0
    status, body = await api.call("GET", "/api/v2/virtual-clusters/default/usage-history?hours=73")
    assert status == 400 and body["message"] == "hours: 73 is greater than the maximum of 72"


async def test_nodes_name_their_tasks_and_gpus(api: Api) -> None:
    await add_node(api, gpu=4)
    await api.call("POST", "/api/v2/jobs", body=job("fits", gpu=3), content_type="application/json")
    await eventually(lambda: state_of(api, "admin~fits", "RUNNING"), what="admin~fits admitted")
    _, (node,) = await api.call("GET", "/api/v2/nodes")
    (task,) = node["tasks"]
    assert (task["job"], task["role"], task["taskIndex"], task["state"]) == ("admin~fits", "w", 0, "WAITING")
    assert node["usedGpus"] == sorted(task["gpus"]) and len(task["gpus"]) == 3 and node["used"]["gpu"] == 3


async def test_a_vcs_queue_is_in_the_schedulers_order_with_each_jobs_reason(api: Api) -> None:
    await add_node(api, gpu=4)
    jobs = [("big", 4, None), ("prio", 4, "prod"), ("small", 1, None), ("huge", 8, None)]
    for name, gpus, priority in jobs:  # big runs; prio, submitted later, goes first (and preempts big)
        await api.call("POST", "/api/v2/jobs", body=job(name, gpu=gpus, priority=priority),
                       content_type="application/json")
        await eventually(lambda n=name: state_of_any(api, f"admin~{n}"), what=f"{name} stored")
        if name == "big":  # admitted before prio comes (a pass that saw both would admit prio alone)
            await eventually(lambda: queue_total(api, 0), what="big admitted")

    async def queue() -> dict[str, Any] | None:
        _, body = await api.call("GET", "/api/v2/virtual-clusters/default/queue")
        return body if body["total"] == 3 and all(j["waitingReason"] for j in body["jobs"]) else None

    body = await eventually(queue, what="three waiting jobs, each with its reason")
    assert [(j["name"], j["waitingReason"]["position"]) for j in body["jobs"]] == [("prio", 1), ("small", 2),
                                                                                   ("huge", 3)]
    prio, _, huge = body["jobs"]
    assert prio["jobPriority"] == "prod" and "preempted" in prio["waitingReason"]["message"]  # it preempts big
    assert "8 GPUs" in huge["waitingReason"]["message"]
    _, first = await api.call("GET", "/api/v2/virtual-clusters/default/queue?limit=1")
    assert first["total"] == 3 and [j["name"] for j in first["jobs"]] == ["prio"]
    await api.write(private_with_bob)
    api.client.app[LAUNCHER].clusters.invalidate()
    await api.login("bob", "bob-password")
    _, theirs = await api.call("GET", "/api/v2/virtual-clusters/default/queue")
    assert theirs["total"] == 3 and theirs["jobs"] == []  # none of them is bob's


async def queue_total(api: Api, total: int) -> bool:
    status, body = await api.call("GET", "/api/v2/virtual-clusters/default/queue")
    return status == 200 and body["total"] == total


async def state_of_any(api: Api, key: str) -> bool:
    return (await api.call("GET", f"/api/v2/jobs/{key}"))[0] == 200
