"""Bad input never hurts the master: errors are ``{code, message}`` with a 4xx and a request id, oversized jobs
are refused before anything is built (raw HTTP: test_raw_http.py; the fuzz: test_fuzz.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from sqlalchemy import exc as sa

from pai.domain.errors import InvalidProtocolError
from pai.launcher.service import Launcher
from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig
from pai.rest_server.errors import REQUEST_ID_HEADER, add_request_id, error_middleware
from pai.rest_server.keys import CONFIG
from tests.rest_server.conftest import ADMIN_PASSWORD, Api

Client = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]
V1_ROLE = {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "true"}


def v1(**changes: Any) -> str:
    return json.dumps({"jobName": "j", "image": "busybox", "taskRoles": [V1_ROLE], **changes})


async def total_jobs(api: Api) -> int:
    status, body = await api.call("GET", "/api/v2/jobs?withTotalCount=true")
    assert status == 200
    return int(body["totalCount"])


def _raiser(error: BaseException) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        raise error

    return handler


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        pytest.param(InvalidProtocolError("a: b", field="a"), 400, "InvalidProtocolError", id="pai error"),
        pytest.param(RecursionError(), 400, "InvalidParametersError", id="recursion"),
        pytest.param(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"), 400, "InvalidParametersError", id="unicode"),
        pytest.param(sa.DataError("INSERT", {}, Exception("out of range")), 400, "InvalidParametersError",
                     id="database data error"),
        pytest.param(sa.StatementError("x", "INSERT", {}, OverflowError("int too large")), 400,
                     "InvalidParametersError", id="sqlite integer overflow"),
        pytest.param(sa.IntegrityError("INSERT", {}, Exception("unique")), 409, "ConflictError", id="integrity"),
        pytest.param(web.HTTPRequestEntityTooLarge(max_size=1, actual_size=2), 413, "RequestTooLargeError",
                     id="body too large"),
        pytest.param(web.HTTPNotFound(), 404, "NotFoundError", id="not found"),
        pytest.param(ValueError("a bug"), 500, "UnknownError", id="bug"),
        pytest.param(sa.StatementError("x", "INSERT", {}, TypeError("a bug")), 500, "UnknownError",
                     id="database bug"),
    ],
)
async def test_every_failure_is_code_and_message_with_a_request_id(
    error: BaseException, status: int, code: str, aiohttp_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    app = web.Application(middlewares=[error_middleware])
    app.on_response_prepare.append(add_request_id)
    app[CONFIG] = MasterConfig()
    app.router.add_get("/fail", _raiser(error))
    client = await aiohttp_client(app)
    with caplog.at_level(logging.INFO, logger="pai.rest"):
        resp = await client.get("/fail")
    body = await resp.json()
    request_id = resp.headers[REQUEST_ID_HEADER]
    assert (resp.status, sorted(body), body["code"]) == (status, ["code", "message"], code)
    assert len(request_id) == 16
    if status == 500:
        assert request_id in body["message"]
        assert any(request_id in r.getMessage() and r.exc_info for r in caplog.records)


@pytest.fixture
async def submissions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every spec that reached Launcher.submit (where the job and its tasks are built)."""
    seen: list[str] = []
    submit = Launcher.submit

    def spy(self: Launcher, user: str, spec: Any, config_text: str) -> Any:
        seen.append(spec.name)
        return submit(self, user, spec, config_text)

    monkeypatch.setattr(Launcher, "submit", spy)
    return seen


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        pytest.param(v1().replace('"taskNumber": 1', '"taskNumber": 1' + "0" * 400), "application/json",
                     "taskRoles[0].taskNumber: 1000", id="v1 taskNumber 10**400"),
        pytest.param("protocolVersion: 2\nname: j\ntype: job\nprerequisites: [{name: i, type: dockerimage, uri: b}]\n"
                     f"taskRoles:\n  w:\n    instances: 1{'0' * 400}\n    dockerImage: i\n"
                     f"    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0}}\n    commands: [x]\n",
                     "text/yaml", "taskRoles.w.instances: 1000", id="v2 instances 10**400"),
        pytest.param(v1(taskRoles=[{**V1_ROLE, "taskNumber": 1001}]), "application/json",
                     "taskRoles[0].taskNumber: 1001 is greater than the maximum of 1000 (cluster limit tasksPerRole)",
                     id="v1 over the cluster limit"),
        pytest.param(v1(retryCount=9223372036854775808), "application/json",
                     "retryCount: 9223372036854775808 is greater than the maximum of 1000", id="int64 retry count"),
    ],
)
async def test_oversized_jobs_are_refused_before_any_task_is_built(
    api: Api, submissions: list[str], body: str, content_type: str, message: str
) -> None:
    status, answer = await api.call("POST", "/api/v2/jobs", body=body, content_type=content_type)
    assert (status, answer["code"]) == (400, "InvalidProtocolError")
    assert answer["message"].startswith(message)
    assert submissions == []
    assert await total_jobs(api) == 0


async def test_the_cluster_limits_come_from_the_master_configuration(
    tmp_path: Path, db_url: str, aiohttp_client: Client
) -> None:
    vc_config = tmp_path / "cluster.yaml"
    vc_config.write_text("limits: {tasksPerRole: 2, tasksPerJob: 3}\n")
    config = MasterConfig(data_dir=tmp_path / "data", database_url=db_url, admin_password=ADMIN_PASSWORD,
                          tick_seconds=0.05, vc_config=vc_config)
    api = Api(await aiohttp_client(make_app(config)))
    await api.login()
    status, answer = await api.call("POST", "/api/v2/jobs", body=v1(taskRoles=[{**V1_ROLE, "taskNumber": 3}]),
                                    content_type="application/json")
    assert (status, answer["message"]) == (400, "taskRoles[0].taskNumber: 3 is greater than the maximum of 2"
                                                " (cluster limit tasksPerRole)")
    roles = [{**V1_ROLE, "name": f"r{i}", "taskNumber": 2} for i in range(2)]
    status, answer = await api.call("POST", "/api/v2/jobs", body=v1(taskRoles=roles), content_type="application/json")
    assert (status, answer["message"]) == (400, "taskRoles: 4 tasks in all is greater than the maximum of 3"
                                                " (cluster limit tasksPerJob)")
    status, _ = await api.call("POST", "/api/v2/jobs", body=v1(taskRoles=roles[:1]), content_type="application/json")
    assert status == 202


async def test_text_the_database_cannot_store_is_a_400(api: Api, db_url: str) -> None:
    """PostgreSQL refuses NUL in text; SQLite stores it (and finds no such user). Either way no 500."""
    status, answer = await api.call("POST", "/api/v2/authn/basic/login",
                                    json_body={"username": "ad\x00min", "password": "x"})
    expected = "InvalidParametersError" if db_url.startswith("postgresql") else "NoUserError"
    assert (status, answer["code"]) == (400, expected) and sorted(answer) == ["code", "message"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        pytest.param("offset=99999999999999999999", "offset: 99999999999999999999 is greater than the maximum of",
                     id="offset past int64"),
        pytest.param("limit=2147483648", "limit: 2147483648 is greater than the maximum of 50000",
                     id="limit past int32 (the list's maximum is 50,000)"),
        pytest.param("offset=" + "0" * 5000 + "7", None, id="leading zeros"),
        pytest.param("limit=-0", None, id="minus zero"),
        pytest.param("limit=-", "limit: '-' is not an integer", id="lone minus"),
        pytest.param("limit=%C2%B2", "limit: '²' is not an integer", id="unicode digit"),
    ],
)
async def test_integer_query_parameters_are_bounded(api: Api, query: str, message: str | None) -> None:
    status, answer = await api.call("GET", f"/api/v2/jobs?{query}")
    if message is None:
        assert status == 200
        return
    assert (status, answer["code"]) == (400, "InvalidParametersError")
    assert answer["message"].startswith(message)
