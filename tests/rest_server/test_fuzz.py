"""Fuzzing the real app in process, on SQLite and PostgreSQL: no input gets a 5xx, every error body is exactly
``{code, message}`` (a submitted document's: and the ``line`` within it where known), and a refused request or a dry
run stores nothing (the job count moves only on a 202).

Seeded (``derandomize``): the same cases on every run, 700 per backend, 1,400 in all.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.rest_server.conftest import AGENT_TOKEN, Api
from tests.rest_server.fuzz_strategies import CONTENT_TYPES, RAW_BODIES, json_requests, mutated_specs, urls

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.large_base_example],
)
SUBMIT_PATHS = st.sampled_from(["/api/v2/jobs", "/api/v1/user/admin/jobs", "/api/v2/jobs?dryRun=true"])


async def total_jobs(api: Api) -> int:
    status, body = await api.call("GET", "/api/v2/jobs?withTotalCount=true&limit=1")
    assert status == 200, body
    return int(body["totalCount"])


def assert_answer(status: int, answer: Any, body: bytes | None = None) -> None:
    assert status < 500, answer
    if status >= 400:
        assert isinstance(answer, dict), answer
        keys = ["code", "line", "message"] if body is not None and "line" in answer else ["code", "message"]
        assert sorted(answer) == keys, answer
        assert isinstance(answer["code"], str) and isinstance(answer["message"], str), answer
        if "line" in answer:  # a line of the document (YAML breaks lines at \r too)
            lines = len(body.decode("utf-8", errors="replace").splitlines()) + 1 if body else 1
            assert isinstance(answer["line"], int) and 1 <= answer["line"] <= lines, answer


async def submit(api: Api, path: str, body: bytes, content_type: str | None) -> None:
    before = await total_jobs(api)
    status, answer = await api.call("POST", path, body=body, content_type=content_type)
    assert_answer(status, answer, body)
    assert status in ((200 if "dryRun" in path else 202), 400, 404, 409, 413), (status, answer)
    assert await total_jobs(api) == before + (status == 202)
    if status == 200:
        return
    if status == 202:  # what was accepted is within the cluster's limits
        status, detail = await api.call("GET", f"/api/v2/jobs/{answer['jobName']}")
        roles = detail["taskRoles"].values()
        assert all(len(r["taskStatuses"]) <= 1000 for r in roles)
        assert sum(len(r["taskStatuses"]) for r in roles) <= 5000


@settings(FUZZ, max_examples=300)
@given(case=mutated_specs(), path=SUBMIT_PATHS)
async def test_mutated_specs(api: Api, case: tuple[bytes, str | None], path: str) -> None:
    await submit(api, path, *case)


@settings(FUZZ, max_examples=200)
@given(body=RAW_BODIES, content_type=CONTENT_TYPES, path=SUBMIT_PATHS)
async def test_raw_bodies(api: Api, body: bytes, content_type: str | None, path: str) -> None:
    await submit(api, path, body, content_type)


@settings(FUZZ, max_examples=120)
@given(request=json_requests())
async def test_json_endpoints(api: Api, request: tuple[str, str, str, bytes]) -> None:
    method, path, token, body = request
    before = await total_jobs(api)
    status, answer = await api.call(method, path, body=body, content_type="application/json",
                                    token=AGENT_TOKEN if token == "agent" else None)
    assert_answer(status, answer)
    assert await total_jobs(api) == before


@settings(FUZZ, max_examples=80)
@given(request=urls())
async def test_urls(api: Api, request: tuple[str, str]) -> None:
    method, url = request
    before = await total_jobs(api)
    status, answer = await api.call(method, url)
    assert_answer(status, answer)
    assert await total_jobs(api) == before
