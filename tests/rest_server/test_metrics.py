"""``GET /metrics``: the cluster as the store has it (nodes, VCs, jobs) and what happened (passes, waits, preemptions,
retries, REST latency by route), scraped and parsed with prometheus-client's own parser."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pai.rest_server import app as app_module
from tests.eventually import eventually
from tests.rest_server.conftest import AGENT_TOKEN, Api
from tests.rest_server.test_nodes import heartbeat
from tests.rest_server.test_vcs import add_node, job

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(api: Api) -> Samples:
    resp = await api.client.get("/metrics")  # no token: Prometheus scrapes it as it scrapes node-exporter
    assert resp.status == 200 and resp.content_type == "text/plain"
    out: Samples = {}
    for family in text_string_to_metric_families(await resp.text()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


async def running(api: Api, key: str, attempt_id: int = 0) -> dict[str, Any]:
    """The job's detail once attempt ``attempt_id`` is RUNNING; its task is reported running by its agent."""
    async def seen() -> dict[str, Any] | None:
        _, detail = await api.call("GET", f"/api/v2/jobs/{key}")
        status = detail["jobStatus"]
        return dict(detail) if (status["attemptId"], status["state"]) == (attempt_id, "RUNNING") else None
    detail = await eventually(seen, what=f"{key} attempt {attempt_id} running")
    return detail


def report(detail: dict[str, Any], status: str = "running", exit_code: int | None = None) -> dict[str, Any]:
    task = detail["taskRoles"]["w"]["taskStatuses"][0]
    out = {"attemptId": task["containerId"], "jobKey": f"admin~{detail['name']}", "role": "w", "index": 0,
           "status": status}
    return out if exit_code is None else {**out, "exitCode": exit_code}


async def test_a_running_jobs_gpus_count_on_its_node_and_vc_and_are_free_after_it(api: Api) -> None:
    await add_node(api, "n1", gpu=8, cpu=16)
    await add_node(api, "n2", gpu=4, cpu=8)
    assert (await api.call("POST", "/api/v2/jobs", body=job("two", gpu=2), content_type="application/json"))[0] == 202
    detail = await running(api, "admin~two")
    node = detail["taskRoles"]["w"]["taskStatuses"][0]["containerNodeName"]
    other = "n2" if node == "n1" else "n1"
    await heartbeat(api, node, [report(detail)])

    m = await scrape(api)
    assert value(m, "pai_node_gpus_used", node=node) == 2
    assert value(m, "pai_node_gpus_free", node=node) == value(m, "pai_node_gpus_capacity", node=node) - 2
    assert value(m, "pai_node_gpus_used", node=other) == 0
    assert value(m, "pai_node_cpus_used", node=node) == 1
    assert value(m, "pai_node_memory_bytes_used", node=node) == 256 * 1024 * 1024
    assert value(m, "pai_vc_gpus_used", virtual_cluster="default") == 2
    assert value(m, "pai_vc_gpus_guaranteed", virtual_cluster="default") == 12
    assert value(m, "pai_jobs", state="RUNNING", virtual_cluster="default") == 1
    assert value(m, "pai_vc_jobs", virtual_cluster="default", state="running") == 1
    assert value(m, "pai_nodes", state="READY") == 2 and value(m, "pai_nodes", state="LOST") == 0
    assert value(m, "pai_job_waiting_seconds_count", virtual_cluster="default") == 1
    assert value(m, "pai_node_state", node=node, state="READY") == 1
    assert value(m, "pai_vc_longest_waiting_seconds", virtual_cluster="default") == 0  # none waits

    await heartbeat(api, node, [report(detail, "exited", 0)])

    async def freed() -> Samples | None:
        m = await scrape(api)
        return m if value(m, "pai_jobs", state="SUCCEEDED", virtual_cluster="default") == 1 else None
    m = await eventually(freed, what="the job's end in the metrics")
    assert value(m, "pai_node_gpus_used", node=node) == 0
    assert value(m, "pai_node_gpus_free", node=node) == value(m, "pai_node_gpus_capacity", node=node)
    assert value(m, "pai_vc_gpus_used", virtual_cluster="default") == 0
    assert value(m, "pai_jobs", state="RUNNING", virtual_cluster="default") == 0


async def test_preemptions_by_rule_and_retries_by_exit_type(api: Api) -> None:
    await add_node(api, "n1")
    retried = json.loads(job("r"))
    retried["retryCount"] = 1
    await api.call("POST", "/api/v2/jobs", json_body=retried)
    detail = await running(api, "admin~r")
    await heartbeat(api, "n1", [report(detail, "exited", 1)])  # a user error: retried, counted
    detail = await running(api, "admin~r", attempt_id=1)
    await heartbeat(api, "n1", [report(detail)])
    await add_node(api, "n2")
    assert (await api.call("PUT", "/api/v2/nodes/n1/state", json_body={"value": "DRAINING"}))[0] == 200

    async def preempted() -> Samples | None:
        m = await scrape(api)
        return m if m.get(("pai_preemptions_total", frozenset({("rule", "drain"), ("virtual_cluster", "default")}))) \
            else None
    await eventually(preempted, what="the drain's preemption counted")
    await heartbeat(api, "n1", [report(detail, "exited", -300)])  # stopped for the drain: requeued by the platform
    await running(api, "admin~r", attempt_id=2)

    m = await scrape(api)
    assert value(m, "pai_preemptions_total", rule="drain", virtual_cluster="default") == 1
    assert value(m, "pai_job_retries_total", exit_type="user", virtual_cluster="default") == 1
    assert value(m, "pai_job_retries_total", exit_type="platform", virtual_cluster="default") == 1
    assert value(m, "pai_job_waiting_seconds_count", virtual_cluster="default") == 3  # three admissions
    assert value(m, "pai_nodes", state="DRAINING") == 1
    assert value(m, "pai_scheduling_pass_duration_seconds_count", kind="full") >= 1


async def test_a_job_that_cannot_start_shows_as_the_vcs_longest_wait(api: Api) -> None:
    await add_node(api, "n1", gpu=1)
    await api.call("POST", "/api/v2/jobs", body=job("big", gpu=4), content_type="application/json")

    async def waited() -> Samples | None:
        m = await scrape(api)
        return m if value(m, "pai_vc_longest_waiting_seconds", virtual_cluster="default") > 0 else None
    m = await eventually(waited, what="the wait measured")
    assert value(m, "pai_vc_longest_waiting_seconds", virtual_cluster="default") < 60
    assert value(m, "pai_jobs", state="WAITING", virtual_cluster="default") == 1
    assert value(m, "pai_vc_jobs", virtual_cluster="default", state="waiting") == 1


async def test_agents_are_listed_for_prometheus_service_discovery(api: Api) -> None:
    for name, port in (("n1", 9301), ("n2", 9302)):
        reg = {"version": 1, "node": {"name": name, "address": f"10.0.0.{port - 9300}", "logPort": port,
                                      "resources": {"gpu": 1, "cpu": 4, "memoryMB": 4096}}}
        assert (await api.call("POST", "/api/internal/agents/register", json_body=reg, token=AGENT_TOKEN))[0] == 200
    resp = await api.client.get("/metrics/agents")
    assert resp.status == 200
    assert await resp.json() == [{"targets": ["10.0.0.1:9301"], "labels": {"node": "n1"}},
                                 {"targets": ["10.0.0.2:9302"], "labels": {"node": "n2"}}]


async def test_rest_latency_is_labelled_by_route_never_by_path(api: Api) -> None:
    for name in ("a", "b", "c"):
        assert (await api.call("GET", f"/api/v2/jobs/admin~{name}"))[0] == 404
    assert (await api.call("GET", "/no/such/path"))[0] == 404
    m = await scrape(api)
    assert value(m, "pai_rest_request_duration_seconds_count", method="GET", route="/api/v2/jobs/{key}",
                 status_class="4xx") == 3
    assert value(m, "pai_rest_request_duration_seconds_count", method="GET", route="unmatched",
                 status_class="4xx") == 1
    assert not [labels for name, labels in m if "admin~a" in str(labels)]
    assert any(name == "process_resident_memory_bytes" for name, _ in m)  # the master's own process


async def test_a_nodes_problems_are_counted_by_kind(api: Api) -> None:
    await add_node(api, "n1")
    await add_node(api, "n2")
    problems = ["disk full: work directory /w: 0 MB free of 64 MB",
                "engine down: the Docker Engine does not answer: connection refused"]
    beat = {"version": 1, "node": "n1", "problems": problems}
    status, _ = await api.call("POST", "/api/internal/agents/n1/heartbeat", json_body=beat, token=AGENT_TOKEN)
    assert status == 200
    m = await scrape(api)
    assert value(m, "pai_node_healthy", node="n1") == 0 and value(m, "pai_node_healthy", node="n2") == 1
    by_kind = {reason: value(m, "pai_node_problems", node="n1", reason=reason)
               for reason in ("disk_full", "read_only", "low_disk", "engine_down", "other")}
    assert by_kind == {"disk_full": 1, "read_only": 0, "low_disk": 0, "engine_down": 1, "other": 0}
    assert value(m, "pai_node_problems", node="n2", reason="disk_full") == 0


async def test_what_held_the_writer_thread_is_timed_by_call(api: Api) -> None:
    """Each call of the store's writer thread, by its function: a submission and the passes that follow it."""
    before = await scrape(api)
    assert (await api.call("POST", "/api/v2/jobs", body=job("held"), content_type="application/json"))[0] == 202
    await eventually(lambda: _passed(api, before), what="a scheduling pass timed on the writer thread")
    m = await scrape(api)
    assert value(m, "pai_store_writer_seconds_count", call="Service._unit") > value(
        before, "pai_store_writer_seconds_count", call="Service._unit")  # the submission's unit
    assert value(m, "pai_store_writer_seconds_sum", call="Launcher.schedule_pass") > 0
    assert not [labels for name, labels in m if name.startswith("pai_store_writer") and "held" in str(labels)]


async def _passed(api: Api, before: Samples) -> bool:
    key = ("pai_store_writer_seconds_count", frozenset({("call", "Launcher.schedule_pass")}))
    return (await scrape(api)).get(key, 0) > before.get(key, 0)


async def test_sqlites_log_is_checkpointed_off_the_commits(api: Api, db_url: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite: the master checkpoints the write-ahead log on a thread of its own; once the log is long enough, then
    what was added meanwhile on the writer thread, which restarts it (ADR 0005); each is timed, and the log's size
    is a gauge. PostgreSQL has none of it."""
    monkeypatch.setattr(app_module, "CHECKPOINT_SECONDS", 0.02)
    monkeypatch.setattr(app_module, "RESTART_PAGES", 1_000_000)  # a log this short: the thread's step only
    assert (await api.call("POST", "/api/v2/jobs", body=job("logged"), content_type="application/json"))[0] == 202

    async def checkpointed(on: str) -> bool:
        return (await scrape(api)).get(("pai_sqlite_checkpoint_seconds_count", frozenset({("on", on)})), 0) >= 2

    if not db_url.startswith("sqlite"):
        await eventually(lambda: _passed(api, {}), what="a scheduling pass")
        m = await scrape(api)
        assert not [name for name, _ in m if name.startswith("pai_sqlite_checkpoint")]
        assert value(m, "pai_sqlite_wal_pages") == 0
        return
    await eventually(lambda: checkpointed("thread"), what="checkpoints on their own thread")
    m = await scrape(api)
    assert m.get(("pai_sqlite_checkpoint_seconds_count", frozenset({("on", "writer")})), 0) == 0  # a short log
    assert m.get(("pai_store_writer_seconds_count", frozenset({("call", "Database.checkpoint")})), 0) == 0
    assert value(m, "pai_sqlite_wal_pages") > 0
    monkeypatch.setattr(app_module, "RESTART_PAGES", 1)
    await eventually(lambda: checkpointed("writer"), what="checkpoints on the writer thread")
    m = await scrape(api)
    assert value(m, "pai_store_writer_seconds_count", call="Database.checkpoint") >= 2  # the writer's part
