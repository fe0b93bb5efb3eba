"""GET /api/v2/jobs is bounded as OpenPAI bounds it: 5,000 jobs unless asked otherwise, never more than 50,000;
filters and order through the real app on both backends."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from sqlalchemy import insert

from pai.domain.errors import InvalidParametersError
from pai.domain.job import Job
from pai.domain.states import JobState
from pai.launcher import queries
from pai.launcher.queries import JobFilters
from pai.rest_server.views import job_summary
from pai.store import jobs as store_jobs
from pai.store import keyword
from pai.store.db import Database
from pai.store.schema import JobRow, TaskRow
from tests.rest_server.conftest import Api
from tests.store.builders import job

JOBS = "/api/v2/jobs"


def store_many(db_url: str, values: list[Job]) -> None:
    """Store jobs as ``insert_job`` does, in one bulk INSERT per table (thousands of jobs in a second)."""
    job_rows, task_rows = [], []
    for v in values:
        row, tasks = store_jobs.rows_of(v, "{}")
        job_rows.append(row)
        task_rows.extend(tasks)
    db = Database(db_url)
    try:
        with db.session() as s:
            s.execute(insert(JobRow), job_rows)
            s.execute(insert(TaskRow), task_rows)
            keyword.rebuild(s.connection())  # the rows went in around insert_job: index their names
            assert store_jobs.get_job(s, values[-1].key) == values[-1]  # what the store reads back
    finally:
        db.dispose()


async def _names(api: Api, query: str) -> list[str]:
    status, body = await api.call("GET", f"{JOBS}?{query}")
    assert status == 200, body
    return [j["name"] for j in body]


async def test_the_default_page_holds_the_newest_5000(api: Api, db_url: str) -> None:
    done = JobState.SUCCEEDED  # finished jobs: the scheduling loop has nothing to do with them
    store_many(db_url, [job(f"j{i:05d}", submitted_at=float(i), state=done) for i in range(5_001)])
    assert await _names(api, "") == [f"j{i:05d}" for i in range(5_000, 0, -1)]
    status, body = await api.call("GET", f"{JOBS}?withTotalCount=true")
    assert (status, body["totalCount"], len(body["data"])) == (200, 5_001, 5_000)
    assert len(await _names(api, "limit=50000")) == 5_001  # the maximum is allowed
    assert await _names(api, "limit=2&offset=5000&order=asc") == ["j05000"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        pytest.param("limit=50001", "limit: 50001 is greater than the maximum of 50000", id="limit past the maximum"),
        pytest.param("limit=99999999999", "limit: 99999999999 is greater than the maximum of 50000",
                     id="limit past int32"),
        pytest.param("limit=-1", "limit: -1 is less than the minimum of 0", id="negative limit"),
        pytest.param("limit=abc", "limit: 'abc' is not an integer", id="limit not an integer"),
        pytest.param("limit=1e3", "limit: '1e3' is not an integer", id="limit in exponent form"),
        pytest.param("offset=-5", "offset: -5 is less than the minimum of 0", id="negative offset"),
        pytest.param("offset=1.5", "offset: '1.5' is not an integer", id="offset not an integer"),
        pytest.param("offset=2147483648", "offset: 2147483648 is greater than the maximum of 2147483647",
                     id="offset past int32"),
        pytest.param("order=sideways", "order: 'sideways' is not one of submissionTime, completionTime, jobName, "
                     "username, vc, state, retries, jobPriority, totalGpuNumber, totalTaskNumber (like "
                     "order=submissionTime,DESC)", id="order"),
        pytest.param("order=jobName,UP", "order: 'UP' is not one of ASC, DESC (like order=jobName,DESC)",
                     id="order's direction"),
        pytest.param("order=jobName", "order: '' is not one of ASC, DESC (like order=jobName,DESC)",
                     id="order without a direction"),
    ],
)
async def test_refusals_name_the_field_and_the_rule(api: Api, query: str, message: str) -> None:
    status, body = await api.call("GET", f"{JOBS}?{query}")
    assert (status, body) == (400, {"code": "InvalidParametersError", "message": message})


@pytest.mark.parametrize("query", ["limit=50000", "limit=0", "limit=", "offset=0&limit=5000", "limit=050000"])
async def test_limits_within_the_rule_are_served(api: Api, query: str) -> None:
    status, body = await api.call("GET", f"{JOBS}?{query}")
    assert (status, body) == (200, [])


@pytest.fixture
async def few(api: Api, db_url: str) -> Api:
    S, F, T = JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED  # ended: the loop leaves them be
    store_many(db_url, [
        job("train-1", "alice", submitted_at=1, virtual_cluster="dev", state=S),
        job("eval-1", "bob", submitted_at=2, virtual_cluster="prod", state=F),
        job("TRAIN-2", "bob", submitted_at=3, virtual_cluster="dev", state=T),
        job("infer-1", "carol", submitted_at=4, virtual_cluster="dev", state=S),
    ])
    return api


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("", ["infer-1", "TRAIN-2", "eval-1", "train-1"], id="newest first by default"),
        pytest.param("order=asc", ["train-1", "eval-1", "TRAIN-2", "infer-1"], id="oldest first"),
        pytest.param("username=bob", ["TRAIN-2", "eval-1"], id="username"),
        pytest.param("vc=dev&order=asc", ["train-1", "TRAIN-2", "infer-1"], id="vc"),
        pytest.param("state=succeeded", ["infer-1", "train-1"], id="state, any case"),
        pytest.param("state=FAILED,STOPPED", ["TRAIN-2", "eval-1"], id="several states"),
        pytest.param("keyword=train", ["TRAIN-2", "train-1"], id="keyword, any case"),
        pytest.param("username=bob&vc=dev&keyword=2", ["TRAIN-2"], id="filters combine"),
        pytest.param("vc=dev&limit=1&offset=1", ["TRAIN-2"], id="a page of a filter"),
        pytest.param("order=submissionTime,ASC", ["train-1", "eval-1", "TRAIN-2", "infer-1"], id="OpenPAI's order"),
        pytest.param("order=vc,ASC", ["train-1", "TRAIN-2", "infer-1", "eval-1"], id="by vc, then submission"),
        pytest.param("order=vc,DESC", ["eval-1", "infer-1", "TRAIN-2", "train-1"], id="by vc, descending"),
        pytest.param("order=totalGpuNumber,DESC&limit=2", ["infer-1", "TRAIN-2"], id="by a total (ties by time)"),
        pytest.param("username=bob,carol", ["infer-1", "TRAIN-2", "eval-1"], id="several users"),
        pytest.param("vc=dev,prod&state=SUCCEEDED", ["infer-1", "train-1"], id="several VCs"),
    ],
)
async def test_filters_and_order(few: Api, query: str, expected: list[str]) -> None:
    assert await _names(few, query) == expected
    status, body = await few.call("GET", f"{JOBS}?{query}&withTotalCount=true")
    assert status == 200 and body["totalCount"] == len(await _names(few, _unpaged(query)))


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        pytest.param("completionTime,ASC", ["early", "late", "running", "waiting"], id="unfinished last going up"),
        pytest.param("completionTime,DESC", ["waiting", "running", "late", "early"], id="unfinished first going down"),
        pytest.param("retries,DESC", ["late", "running", "waiting", "early"], id="retries: user and platform"),
    ],
)
async def test_openpai_orders_with_nulls_and_totals(api: Api, db_url: str, order: str, expected: list[str]) -> None:
    S, R, W = JobState.SUCCEEDED, JobState.RUNNING, JobState.WAITING
    store_many(db_url, [
        replace(job("early", submitted_at=1, state=S), completed_at=10.0),
        replace(job("late", submitted_at=2, state=S), completed_at=20.0, retries=1, platform_retries=2),
        replace(job("running", submitted_at=3, state=R), retries=2),
        replace(job("waiting", submitted_at=4, state=W), platform_retries=1),
    ])
    assert await _names(api, f"order={order}") == expected


def _unpaged(query: str) -> str:
    return "&".join(p for p in query.split("&") if not p.startswith(("limit=", "offset=")))


async def test_a_listed_job_reads_as_its_summary(api: Api, db_url: str) -> None:
    """The list computes the spec's totals in SQL; they match what ``job_summary`` computes from the spec."""
    roles = [{"name": "ps", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "ps"},
             {"name": "worker", "taskNumber": 3, "cpuNumber": 2, "memoryMB": 512, "gpuNumber": 2, "command": "w"}]
    spec = {"jobName": "gang", "image": "busybox", "taskRoles": roles}
    status, _ = await api.call("POST", JOBS, body=json.dumps(spec), content_type="application/json")
    assert status == 202
    db = Database(db_url)
    try:
        with db.session() as s:
            stored = store_jobs.get_job(s, "admin~gang")
    finally:
        db.dispose()
    status, listed = await api.call("GET", JOBS)
    assert status == 200 and listed[0]["totalGpuNumber"] == 6 and listed[0]["totalTaskNumber"] == 5
    # The loop may have moved the job on between the two reads; the summary's other fields must still agree.
    moving = ("state", "subState", "launchedTime", "completedTime", "appExitCode", "retries", "executionType")
    assert {k: v for k, v in listed[0].items() if k not in moving} == {
        k: v for k, v in job_summary(stored).items() if k not in moving}


def test_the_launcher_refuses_a_page_past_the_maximum_too(db_url: str) -> None:
    """``pai.launcher.queries`` holds the rule, whoever calls it; the handler only parses."""
    db = Database(db_url)
    try:
        db.migrate()
        with pytest.raises(InvalidParametersError, match=r"^limit: 50001 is greater than the maximum of 50000$"):
            queries.list_jobs(db, JobFilters(limit=queries.MAX_LIMIT + 1))
        assert queries.list_jobs(db, JobFilters(limit=queries.MAX_LIMIT, with_total=True)) == queries.JobPage([], 0)
    finally:
        db.dispose()
