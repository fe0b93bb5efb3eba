"""The OpenAPI document (job_schemas/openapi.yaml, served at GET /api/v2/openapi.json) is true to the master.

- it is valid OpenAPI;
- every route of the route table but ``/api/internal/`` is one of its operations, and every operation is a route;
- every (operation, status) it lists is produced by a named request of ``CASES`` against a live master (401 by
  ``test_without_a_token_exactly_the_documented_operations_answer_401``), and no case produces one it does not list;
  the error codes a response's description names are exactly the codes its cases get; every JSON answer is valid
  against the schema the document gives for it, and every body a successful case sends against the request schema.

So the document cannot claim an answer the master never gives, and a route cannot be added without documenting it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from aiohttp import WSMsgType, WSServerHandshakeError, web
from aiohttp.test_utils import TestServer
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from sqlalchemy.orm import Session

from pai.launcher import cluster
from pai.rest_server.keys import CONFIG, LAUNCHER
from pai.rest_server.openapi import document
from pai.rest_server.routes import PYLON, routes
from pai.store import jobs as store_jobs
from pai.store import sessions, users
from tests.eventually import eventually
from tests.rest_server.conftest import ADMIN_PASSWORD, AGENT_TOKEN, Api
from tests.rest_server.test_experiments import experiment

DOC = document()
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
CODE = re.compile(r"`(\w+Error)`")


# OpenAPI allows no two paths that differ only in their parameters' names: the document has one for these routes.
SAME_PATH = {"/api/v1/jobs/{key}": "/api/v1/jobs/{job}", "/api/v1/jobs/{name}": "/api/v1/jobs/{job}"}


def route_path(path: str) -> str:
    """An aiohttp route's path as the document writes it: ``{name:regex}`` is ``{name}``, the trailing slash
    dropped (a regex may hold braces of its own: ``{trial:\\d{1,18}}``); the API under ``/rest-server`` is the
    document's second server."""
    path = path.removeprefix(PYLON).removesuffix("{trailing_slash:/?}")
    path = re.sub(r"\{(\w+):(?:[^{}]|\{[^{}]*\})*\}", r"{\1}", path)
    return SAME_PATH.get(path, path)


def documented() -> dict[tuple[str, str], dict[str, Any]]:
    """(METHOD, path) -> operation."""
    return {(m.upper(), p): op for p, item in DOC["paths"].items() for m, op in item.items() if m in METHODS}


def resolve(obj: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in obj:
        node: Any = DOC
        for part in obj["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        obj = node
    return obj


def response(method: str, path: str, status: int) -> dict[str, Any]:
    return resolve(documented()[method, path]["responses"][str(status)])


def needs_token(op: dict[str, Any]) -> bool:
    return bool(op.get("security", DOC["security"]))


def check_schema(instance: Any, schema: dict[str, Any], what: str) -> None:
    """``instance`` against a schema of the document (its references point into the document: it is the root)."""
    validator = Draft202012Validator({**DOC, "$defs": {"checked": schema}, "$ref": "#/$defs/checked"})
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    assert not errors, f"{what}: {errors[0].message} at {list(errors[0].absolute_path)}"


# ---- the world a case runs in --------------------------------------------------------------------------------

UPGRADE = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
YAML_JOB = ("protocolVersion: 2\nname: {name}\ntype: job\ndefaults: {{virtualCluster: {vc}}}\n"
            "prerequisites:\n  - {{type: dockerimage, name: img, uri: busybox}}\n"
            "taskRoles:\n  w:\n    instances: 1\n    dockerImage: img\n"
            "    resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}\n    commands: ['true']\n")


def v1_job(name: str, vc: str = "default") -> dict[str, Any]:
    return {"jobName": name, "image": "busybox", "virtualCluster": vc, "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "true"}]}


@dataclass
class Answer:
    status: int
    content_type: str
    body: Any


class World:
    """What cases need, made on first use against the live master: users, tokens, jobs, a node, VCs."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.tokens: dict[str, str] = {"admin": api.token or ""}
        self.done: set[str] = set()
        self.trials: list[int] = []  # admin~lr's trials' ids, by number

    def url(self, url: str) -> str:
        """A case's URL with what the world made: ``{bob}`` bob's token, ``{t0}``, ``{t1}`` the trials' ids."""
        url = url.replace("{bob}", self.tokens.get("bob", ""))
        for number, trial in enumerate(self.trials):
            url = url.replace(f"{{t{number}}}", str(trial))
        return url

    async def request(self, method: str, path: str, *, token: str | None, json_body: Any = None,
                      body: str | None = None, content_type: str | None = None, websocket: bool = False) -> Answer:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if websocket:  # a handshake: 101 and open, or the refusal's answer
            try:
                async with self.api.client.ws_connect(path, headers=headers):
                    return Answer(101, "", None)
            except WSServerHandshakeError:
                headers.update(UPGRADE)
        if content_type:
            headers["Content-Type"] = content_type
        resp = await self.api.client.request(method, path, json=json_body, data=body, headers=headers)
        text = await resp.text()
        parsed = json.loads(text) if resp.content_type == "application/json" else text
        return Answer(resp.status, resp.content_type, parsed)

    async def admin(self, method: str, path: str, **kw: Any) -> Answer:
        return await self.request(method, path, token=self.tokens["admin"], **kw)

    async def token(self, who: str) -> str | None:
        if who == "none":
            return None
        if who == "fresh":  # a login of its own, for a case that revokes it
            return await self.api.login()
        if who == "app" and "app" not in self.tokens:
            self.tokens["app"] = (await self.admin("POST", "/api/v2/tokens/application")).body["token"]
        if who == "bob":
            await self.setup("bob")
        return self.tokens[who]

    async def setup(self, what: str) -> None:
        if what in self.done:
            return
        self.done.add(what)
        await getattr(self, "_" + what.replace("-", "_"))()

    async def _bob(self) -> None:
        """bob, a user who is no admin, in the groups every user is in."""
        await self.api.write(lambda s: users.create_user(s, "bob", "bob-password"))
        self.tokens["bob"] = await self.api.login("bob", "bob-password")
        self.api.token = self.tokens["admin"]

    async def _job(self) -> None:
        """admin~j, WAITING (no node)."""
        answer = await self.admin("POST", "/api/v2/jobs", body=YAML_JOB.format(name="j", vc="default"),
                                  content_type="text/yaml")
        assert answer.status == 202, answer

    async def _ended(self) -> None:
        """admin~e, STOPPED."""
        assert (await self.admin("POST", "/api/v1/jobs", json_body=v1_job("e"))).status == 202
        assert (await self.admin("PUT", "/api/v2/jobs/admin~e/executionType", json_body={"value": "STOP"})).status \
            == 202
        await self.wait("admin~e", "STOPPED")

    async def _running(self) -> None:
        """admin~r, RUNNING on node n1, whose agent's log server answers."""
        await self.setup("log-server")
        assert (await self.admin("POST", "/api/v1/jobs", json_body=v1_job("r"))).status == 202
        await self.wait("admin~r", "RUNNING")

    async def _ssh_job(self) -> None:
        """admin~s, with the ssh runtime plugin, RUNNING on node n1."""
        await self.setup("log-server")
        body = YAML_JOB.format(name="s", vc="default") + (
            "extras:\n  com.microsoft.pai.runtimeplugin:\n    - {plugin: ssh, parameters: {jobssh: true}}\n")
        assert (await self.admin("POST", "/api/v2/jobs", body=body, content_type="text/yaml")).status == 202
        await self.wait("admin~s", "RUNNING")

    async def _listening(self) -> None:
        """admin~r's task reported running by n1, and something listening on its port ``http``."""
        await self.setup("running")
        detail = (await self.admin("GET", "/api/v2/jobs/admin~r")).body
        task = detail["taskRoles"]["w"]["taskStatuses"][0]
        report = {"attemptId": task["containerId"], "jobKey": "admin~r", "role": "w", "index": 0, "status": "running"}
        answer = await self.request("POST", "/api/internal/agents/n1/heartbeat", token=AGENT_TOKEN,
                                    json_body={"version": 1, "node": "n1", "containers": [report]})
        assert answer.status == 200, answer
        self.listener = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1",
                                                   int(task["containerPorts"]["http"]))
        for _ in range(200):
            detail = (await self.admin("GET", "/api/v2/jobs/admin~r")).body
            if detail["taskRoles"]["w"]["taskStatuses"][0]["taskState"] == "RUNNING":
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"admin~r's task never started: {detail}")

    async def _full(self) -> None:
        """admin has as many interactive sessions open as the master allows (their rows, as API workers keep them)."""
        await self.setup("listening")
        app = self.api.client.app
        limit = app[CONFIG].max_sessions_per_user

        def fill(s: Session) -> None:
            job_id = store_jobs.get_job(s, "admin~r").id
            for i in range(limit):
                sessions.open_session(s, sessions.OpenSession(f"s{i}", "admin", job_id, "tunnel", "port http"),
                                      limit=limit, stale_after=30)

        await self.api.write(fill)

    async def _log_server(self) -> None:
        """Node n1, with a log server (as an agent runs) that has every log."""
        async def log(request: web.Request) -> web.Response:
            assert request.headers["Authorization"] == f"Bearer {AGENT_TOKEN}"
            return web.Response(text="hello\n", headers={"X-Log-Size": "6", "X-Log-Dropped": "0"})

        async def exec_(request: web.Request) -> web.StreamResponse:
            """``cmd=fail``: the agent's own trouble; ``cmd=echo``: stdin back as stdout until eof; else exit 0."""
            if request.query.get("cmd") == "fail":
                return web.json_response({"code": "UnknownError", "message": "exec could not start"}, status=500)
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            if request.query.get("cmd") == "echo":
                async for msg in ws:
                    if msg.type is WSMsgType.BINARY:
                        await ws.send_bytes(b"\x01" + msg.data)
                    elif msg.type is WSMsgType.TEXT and json.loads(msg.data)["type"] == "eof":
                        break
            with contextlib.suppress(ConnectionError):  # the master went first
                await ws.send_str(json.dumps({"type": "exit", "code": 0}))
            await ws.close()
            return ws

        app = web.Application()
        app.router.add_get("/logs/{attempt}/{stream}", log)
        app.router.add_get("/exec/{attempt}", exec_)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()
        await self._register(self.server.port or 0)

    async def _node(self) -> None:
        await self._register(0)

    async def _register(self, log_port: int) -> None:
        reg = {"version": 1, "node": {"name": "n1", "address": "127.0.0.1", "logPort": log_port,
                                      "resources": {"gpu": 0, "cpu": 8, "memoryMB": 65536}}}
        answer = await self.request("POST", "/api/internal/agents/register", token=AGENT_TOKEN, json_body=reg)
        assert answer.status == 200, answer

    async def wait(self, key: str, state: str) -> None:
        for _ in range(200):
            answer = await self.admin("GET", f"/api/v2/jobs/{key}")
            if answer.body["jobStatus"]["state"] == state:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{key} never reached {state}: {answer.body}")

    async def _private(self) -> None:
        """The configuration's ``access.jobsReadableByAll: false``: users read their own jobs only (written on the
        app's writer thread: on SQLite a write of the test's own would race the launcher's, busy with experiments)."""
        await self.api.write(lambda s: cluster.apply_file(s, {"access": {"jobsReadableByAll": False}}, 0.0))
        self.api.client.app[LAUNCHER].clusters.invalidate()

    async def _storage(self) -> None:
        await self.api.write(lambda s: cluster.apply_file(s, {"storages": [{"name": "data", "path": "/nfs/data"}]},
                                                          0.0))
        self.api.client.app[LAUNCHER].clusters.invalidate()

    async def _team(self) -> None:
        """VC team (only admins may submit to it: no user is in its group)."""
        assert (await self.admin("PUT", "/api/v2/virtual-clusters/team", json_body={})).status == 201

    async def _stopped_team(self) -> None:
        await self.setup("team")
        answer = await self.admin("PUT", "/api/v2/virtual-clusters/team/status", json_body={"vcStatus": "stopped"})
        assert answer.status == 201

    async def _team_job(self) -> None:
        """admin~t, WAITING in VC team."""
        await self.setup("team")
        assert (await self.admin("POST", "/api/v1/jobs", json_body=v1_job("t", "team"))).status == 202

    async def _experiment(self) -> None:
        """admin~lr, ACTIVE: a random search of two trials at once."""
        answer = await self.admin("POST", "/api/v2/experiments", body=yaml.safe_dump(experiment()),
                                  content_type="text/yaml")
        assert answer.status == 202, answer

    async def _trials(self) -> None:
        """admin~lr's two trials made by the master's loop and started on node n1 (the start commands' environment
        holds their own tokens: ``trial0``, ``trial1``)."""
        await self.setup("experiment")

        async def made() -> list[int] | None:
            trials = (await self.admin("GET", "/api/v2/experiments/admin~lr")).body["trials"]
            return [t["id"] for t in trials] if len(trials) == 2 else None
        self.trials = await eventually(made, what="admin~lr's two trials")
        await self.setup("node")
        tokens: dict[int, str] = {}

        async def started() -> bool:
            answer = await self.request("POST", "/api/internal/agents/n1/heartbeat", token=AGENT_TOKEN,
                                        json_body={"version": 1, "node": "n1", "containers": []})
            assert answer.status == 200, answer
            tokens.update({int(c["env"]["PAI_TRIAL_ID"]): c["env"]["PAI_TRIAL_TOKEN"]
                           for c in answer.body["commands"] if c["type"] == "start"})
            return len(tokens) == 2
        await eventually(started, what="the trials' start commands")
        for number, trial in enumerate(self.trials):
            self.tokens[f"trial{number}"] = tokens[trial]

    async def _reported(self) -> None:
        """Trial 0 reported its loss (the searcher's metric) and another metric at step 1."""
        await self.setup("trials")
        answer = await self.request("POST", self.url("/api/v2/trials/{t0}/metrics"), token=self.tokens["trial0"],
                                    json_body={"step": 1, "metrics": {"loss": 0.5, "acc": 0.25}})
        assert answer.status == 200, answer

    async def _checkpoint(self) -> None:
        """Trial 0 recorded a checkpoint at step 1."""
        await self.setup("trials")
        answer = await self.request("POST", self.url("/api/v2/trials/{t0}/checkpoints"), token=self.tokens["trial0"],
                                    json_body={"step": 1, "path": "/ckpt/1.pt", "metadata": {"epoch": 0}})
        assert answer.status == 200, answer

    async def _ops(self) -> None:
        assert (await self.admin("POST", "/api/v2/groups", json_body={"groupname": "ops"})).status == 201

    async def close(self) -> None:
        if "log-server" in self.done:
            await self.server.close()
        if "listening" in self.done:
            self.listener.close()


# ---- the table -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    method: str
    path: str  # as the document writes it
    status: int
    url: str  # what is asked for
    code: str | None = None  # the error code answered
    as_: str = "admin"  # whose token: admin, bob, app (admin's application token), fresh (a new login), none
    json_body: Any = None
    body: str | None = None
    content_type: str | None = None
    setup: tuple[str, ...] = ()
    note: str = ""
    check: Callable[[Answer], None] | None = field(default=None, compare=False)
    websocket: bool = False  # asked as a WebSocket handshake

    @property
    def id(self) -> str:
        return " ".join(x for x in (self.method, self.path, str(self.status), self.code or "",
                                    f"({self.note})" if self.note else "") if x)


def case(op: str, status: int, url: str | None = None, code: str | None = None, **kw: Any) -> Case:
    method, path = op.split(" ", 1)
    return Case(method, path, status, url if url is not None else path, code, **kw)


def _service() -> Iterator[Case]:
    yield case("GET /api/v1", 200, as_="none")
    yield case("GET /api/v2/info", 200, as_="none")
    yield case("GET /healthz", 200, as_="none")
    yield case("GET /api/v2/openapi.json", 200, as_="none",
               check=lambda a: _same(a.body, json.loads(json.dumps(DOC))))


def _same(got: Any, want: Any) -> None:
    assert got == want


def _auth() -> Iterator[Case]:
    good = {"username": "admin", "password": ADMIN_PASSWORD}
    for path in ("/api/v1/authn/basic/login", "/api/v2/authn/basic/login", "/api/v1/token", "/api/v2/tokens"):
        op = f"POST {path}"
        yield case(op, 200, json_body=good, as_="none")
        yield case(op, 400, code="InvalidParametersError", json_body={"username": "admin"}, as_="none")
        yield case(op, 400, code="NoUserError", json_body={"username": "nobody", "password": "x"}, as_="none")
        yield case(op, 400, code="IncorrectPasswordError", json_body={"username": "admin", "password": "wrong"},
                   as_="none")
    yield case("POST /api/v1/token", 200, body="username=admin&password=admin-password&expiration=60",
               content_type="application/x-www-form-urlencoded", as_="none", note="form")
    for v in ("v1", "v2"):
        yield case(f"DELETE /api/{v}/authn/basic/logout", 200, as_="fresh")
        yield case(f"DELETE /api/{v}/authn/basic/logout", 403, code="ForbiddenUserError", as_="app")
        yield case(f"GET /api/{v}/authn/info", 200, as_="none")
    for base in ("/api/v1/token", "/api/v2/tokens"):
        yield case(f"GET {base}", 200)
        yield case(f"GET {base}", 403, code="ForbiddenUserError", as_="app")
        yield case(f"POST {base}/application", 200)
        yield case(f"POST {base}/application", 403, code="ForbiddenUserError", as_="app")
        yield case(f"GET {base}/check", 200)
        yield case(f"GET {base}/check", 200, as_="app", note="application token")
        yield case(f"DELETE {base}/{{token}}", 200, f"{base}/nope")
        yield case(f"DELETE {base}/{{token}}", 403, f"{base}/{{bob}}", "ForbiddenUserError", setup=("bob",),
                   note="another user's token")


def _users() -> Iterator[Case]:
    u = "/api/v2/users"
    yield case(f"GET {u}", 200)
    yield case(f"POST {u}", 201, json_body={"username": "carol", "password": "carol-password"})
    yield case(f"POST {u}", 400, code="InvalidParametersError", json_body={"username": "carol"})
    yield case(f"POST {u}", 403, code="ForbiddenUserError", as_="bob",
               json_body={"username": "carol", "password": "carol-password"})
    yield case(f"POST {u}", 404, code="NoVirtualClusterError",
               json_body={"username": "carol", "password": "carol-password", "virtualCluster": ["nope"]})
    yield case(f"POST {u}", 409, code="ConflictUserError", json_body={"username": "admin", "password": "secret1"})
    patch = {"patch": True, "data": {"username": "admin", "email": "admin@example.com"}}
    yield case(f"PUT {u}", 201, json_body=patch)
    yield case(f"PUT {u}", 400, code="InvalidParametersError", json_body={})
    yield case(f"PUT {u}", 403, code="ForbiddenUserError", as_="bob", json_body=patch)
    yield case(f"PUT {u}", 404, code="NoUserError", json_body={"patch": True, "data": {"username": "nobody",
                                                                                      "email": "a@example.com"}})
    yield case(f"PUT {u}", 404, code="NoVirtualClusterError", setup=("bob",),
               json_body={"patch": True, "data": {"username": "bob", "virtualCluster": ["nope"]}})
    yield case(f"PUT {u}/me", 201, json_body=patch)
    yield case(f"PUT {u}/me", 400, code="InvalidParametersError", json_body={"data": 1})
    yield case(f"PUT {u}/me", 403, code="ForbiddenUserError", as_="bob", json_body=patch, note="another's name")
    one = f"{u}/{{user}}"
    yield case(f"GET {one}", 200, f"{u}/admin")
    yield case(f"GET {one}", 400, f"{u}/nobody", "NoUserError")
    yield case(f"DELETE {one}", 200, f"{u}/bob", setup=("bob",))
    yield case(f"DELETE {one}", 403, f"{u}/admin", "ForbiddenUserError", as_="bob")
    yield case(f"DELETE {one}", 403, f"{u}/admin", "RemoveAdminError")
    yield case(f"DELETE {one}", 404, f"{u}/nobody", "NoUserError")
    legacy: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
        # (path, a body that works, a body that breaks the schema, whose change bob may not make)
        ("password", {"newPassword": "secret99"}, {"newPassword": "x"}, "admin"),
        ("email", {"email": "x@example.com"}, {"email": 5}, "admin"),
        ("admin", {"admin": False}, {"admin": "no"}, "bob"),
        ("virtualcluster", {"virtualCluster": []}, {}, "bob"),
        ("extension", {"extension": {"team": "x"}}, {"extension": 1}, "admin"),
        ("grouplist", {"grouplist": ["default"]}, {"grouplist": "default"}, "bob"),
        ("group", {"groupname": "default"}, {"groupname": "no spaces"}, "bob"),
    ]
    for name, good, bad, target in legacy:
        op = f"{u}/{{user}}/{name}"
        methods = ("PUT", "DELETE") if name == "group" else ("PUT",)
        for m in methods:
            yield case(f"{m} {op}", 201, f"{u}/bob/{name}", json_body=good, setup=("bob",))
            yield case(f"{m} {op}", 400, f"{u}/bob/{name}", "InvalidParametersError", json_body=bad, setup=("bob",))
            yield case(f"{m} {op}", 403, f"{u}/{target}/{name}", "ForbiddenUserError", as_="bob", json_body=good)
            yield case(f"{m} {op}", 404, f"{u}/nobody/{name}", "NoUserError", json_body=good)
    yield case(f"PUT {u}/{{user}}/virtualcluster", 403, f"{u}/admin/virtualcluster", "ForbiddenUserError",
               json_body={"virtualCluster": []}, note="an admin's")
    yield case(f"PUT {u}/{{user}}/virtualcluster", 404, f"{u}/bob/virtualcluster", "NoVirtualClusterError",
               json_body={"virtualCluster": ["nope"]}, setup=("bob",))
    yield case(f"PUT {u}/{{user}}/grouplist", 404, f"{u}/bob/grouplist", "NoGroupError",
               json_body={"grouplist": ["nope"]}, setup=("bob",))
    yield case(f"PUT {u}/{{user}}/group", 404, f"{u}/bob/group", "NoGroupError",
               json_body={"groupname": "nope"}, setup=("bob",))


def _groups() -> Iterator[Case]:
    g = "/api/v2/groups"
    yield case(f"GET {g}", 200)
    yield case(f"POST {g}", 201, json_body={"groupname": "ops", "description": "the operators"})
    yield case(f"POST {g}", 400, code="InvalidParametersError", json_body={"groupname": "no spaces"})
    yield case(f"POST {g}", 403, code="ForbiddenUserError", as_="bob", json_body={"groupname": "ops"})
    yield case(f"POST {g}", 409, code="ConflictGroupError", json_body={"groupname": "default"})
    patch = {"patch": True, "data": {"groupname": "default", "description": "everyone"}}
    yield case(f"PUT {g}", 201, json_body=patch)
    yield case(f"PUT {g}", 201, json_body={"data": {"groupname": "default", "description": "everyone",
                                                    "externalName": "", "extension": {}}}, note="whole")
    yield case(f"PUT {g}", 400, code="InvalidParametersError", json_body={"data": {"groupname": "default"}})
    yield case(f"PUT {g}", 400, code="NoGroupError",
               json_body={"patch": True, "data": {"groupname": "nope", "description": "x"}})
    yield case(f"PUT {g}", 403, code="ForbiddenUserError", as_="bob", json_body=patch)
    one = f"{g}/{{group}}"
    yield case(f"GET {one}", 200, f"{g}/default")
    yield case(f"GET {one}", 400, f"{g}/nope", "NoGroupError")
    yield case(f"DELETE {one}", 200, f"{g}/ops", setup=("ops",))
    yield case(f"DELETE {one}", 403, f"{g}/ops", "ForbiddenUserError", as_="bob")
    yield case(f"DELETE {one}", 403, f"{g}/default", "ForbiddenUserError", note="built in")
    yield case(f"DELETE {one}", 404, f"{g}/nope", "NoGroupError")
    yield case(f"GET {one}/userlist", 200, f"{g}/default/userlist")
    yield case(f"GET {one}/userlist", 403, f"{g}/default/userlist", "ForbiddenUserError", as_="bob")
    yield case(f"GET {one}/userlist", 404, f"{g}/nope/userlist", "NoGroupError")
    for name, good, bad in (("description", {"description": "everyone"}, {"description": 1}),
                            ("externalname", {"externalName": "cn=all"}, {"externalname": "cn=all"}),
                            ("extension", {"extension": {"team": "x"}}, {"extension": []}),
                            ("extension/{attr}", {"data": ["dev"]}, {"value": 1})):
        op = f"PUT {one}/{name}"
        url = f"{g}/default/{name}".replace("{attr}", "acls/virtualClusters")
        yield case(op, 201, url, json_body=good)
        yield case(op, 400, url, "InvalidParametersError", json_body=bad)
        yield case(op, 400, url.replace("default", "nope"), "NoGroupError", json_body=good)
        yield case(op, 403, url, "ForbiddenUserError", as_="bob", json_body=good)


def _submissions() -> Iterator[Case]:
    ops = [("POST /api/v2/jobs", "/api/v2/jobs", "/api/v2/jobs"),
           ("POST /api/v1/jobs", "/api/v1/jobs", "/api/v1/jobs"),
           ("POST /api/v1/user/{user}/jobs", "/api/v1/user/admin/jobs", "/api/v1/user/bob/jobs"),
           ("PUT /api/v1/jobs/{job}", "/api/v1/jobs/{name}", "/api/v1/jobs/{name}"),
           ("PUT /api/v1/user/{user}/jobs/{name}", "/api/v1/user/admin/jobs/{name}", "/api/v1/user/bob/jobs/{name}")]
    for op, url, bobs in ops:
        def at(path: str, name: str) -> str:
            return path.replace("{name}", name)

        if op == "POST /api/v2/jobs":
            yield case(op, 202, url, body=YAML_JOB.format(name="s", vc="default"), content_type="text/yaml")
            yield case(op, 200, url + "?dryRun=true", body=YAML_JOB.format(name="s", vc="default"),
                       content_type="text/yaml", note="dry run")
            yield case(op, 400, url + "?dryRun=true", "InvalidProtocolError", content_type="text/yaml",
                       body=YAML_JOB.format(name="s", vc="default").replace("gpu: 0", "gpu: -1"),
                       note="dry run", check=lambda a: _same(a.body["line"], 11))  # resourcePerInstance's
            yield case(op, 400, url + "?dryRun=yes", "InvalidParametersError", json_body=v1_job("s"),
                       note="dryRun neither true nor false")
        else:
            yield case(op, 202, at(url, "s"), json_body=v1_job("s"))
        yield case(op, 400, at(url, "s"), "InvalidProtocolError", json_body={"jobName": "s"})
        yield case(op, 400, at(url, "s"), "InvalidParametersError", json_body=v1_job("s", "team"),
                   setup=("stopped-team",), note="a stopped VC")
        yield case(op, 403, at(bobs, "s"), "ForbiddenUserError", as_="bob", json_body=v1_job("s", "team"),
                   setup=("team",), note="a VC not granted")
        yield case(op, 404, at(url, "s"), "NoVirtualClusterError", json_body=v1_job("s", "nope"))
        yield case(op, 409, at(url, "j"), "ConflictJobError", json_body=v1_job("j"), setup=("job",))
    yield case("PUT /api/v1/jobs/{job}", 400, "/api/v1/jobs/other", "InvalidParametersError", json_body=v1_job("s"),
               note="another name")
    yield case("POST /api/v1/user/{user}/jobs", 403, "/api/v1/user/bob/jobs", "ForbiddenUserError",
               json_body=v1_job("s"), note="as another user")
    yield case("POST /api/v1/jobs", 202, "/api/v1/jobs", content_type="application/x-www-form-urlencoded",
               body="jobName=f&image=busybox&taskRoles[0][name]=w&taskRoles[0][taskNumber]=1&"
                    "taskRoles[0][cpuNumber]=1&taskRoles[0][memoryMB]=256&taskRoles[0][gpuNumber]=0&"
                    "taskRoles[0][command]=true", note="form")


def _job_reads() -> Iterator[Case]:
    mine, private = ("job",), ("private", "bob")
    yield case("GET /api/v2/job-templates", 200, as_="bob", check=lambda a: _same(
        {x["name"]: x["kind"] for x in a.body if x["name"] in ("hello-v2", "experiment")},
        {"hello-v2": "job", "experiment": "experiment"}))
    for op, url, users_url in (("GET /api/v2/jobs", "/api/v2/jobs", "/api/v2/jobs?username=admin"),
                               ("GET /api/v1/jobs", "/api/v1/jobs", "/api/v1/jobs?username=admin"),
                               ("GET /api/v1/user/{user}/jobs", "/api/v1/user/admin/jobs", "/api/v1/user/admin/jobs")):
        yield case(op, 200, url, setup=mine)
        yield case(op, 200, url + ("&" if "?" in url else "?") + "withTotalCount=true", setup=mine, note="total")
        yield case(op, 400, url + "?state=DONE", "InvalidParametersError")
        yield case(op, 403, users_url, "ForbiddenUserError", as_="bob", setup=private)
    key = "/api/v2/jobs/{key}"
    reads: list[tuple[str, str, str]] = [  # (operation, the URL of admin~{}, what makes a 200)
        ("GET /api/v1/jobs/{job}", "/api/v1/jobs/admin~{}", "job"),
        ("GET /api/v1/user/{user}/jobs/{name}", "/api/v1/user/admin/jobs/{}", "job"),
        ("GET /api/v1/user/{user}/jobs/{name}/config", "/api/v1/user/admin/jobs/{}/config", "job"),
        (f"GET {key}", "/api/v2/jobs/admin~{}", "job"),
        (f"GET {key}/config", "/api/v2/jobs/admin~{}/config", "job"),
        (f"GET {key}/attempts", "/api/v2/jobs/admin~{}/attempts", "running"),
        (f"GET {key}/attempts/{{attempt}}", "/api/v2/jobs/admin~{}/attempts/0", "job"),
        (f"GET {key}/attempts/{{attempt}}/taskRoles/{{role}}/taskIndex/{{index}}/attempts",
         "/api/v2/jobs/admin~{}/attempts/0/taskRoles/w/taskIndex/0/attempts", "running"),
        (f"GET {key}/attempts/{{attempt}}/taskRoles/{{role}}/taskIndex/{{index}}/attempts/{{task_attempt}}/logs",
         "/api/v2/jobs/admin~{}/attempts/0/taskRoles/w/taskIndex/0/attempts/0/logs", "running"),
        (f"GET {key}/job-attempts", "/api/v2/jobs/admin~{}/job-attempts", "running"),
        (f"GET {key}/job-attempts/{{attempt}}", "/api/v2/jobs/admin~{}/job-attempts/0", "job"),
        (f"GET {key}/events", "/api/v2/jobs/admin~{}/events", "job"),
        (f"GET {key}/tasks/{{role}}/{{index}}/logs/{{stream}}", "/api/v2/jobs/admin~{}/tasks/w/0/logs/stdout",
         "running"),
        (f"GET {key}/ssh", "/api/v2/jobs/admin~{}/ssh", ""),
    ]
    for op, url, ready in reads:
        name = "r" if ready == "running" else "j"
        if ready:
            yield case(op, 200, url.format(name), setup=(ready,))
        yield case(op, 403, url.format(name), "ForbiddenUserError", as_="bob", setup=private)
        if "/tasks/" not in op:
            yield case(op, 404, url.format("nope"), "NoJobError")
    yield case(f"GET {key}/config", 200, "/api/v2/jobs/admin~e/config", setup=("ended",), note="a v1 job, JSON")
    yield case(f"GET {key}/attempts/{{attempt}}", 404, "/api/v2/jobs/admin~j/attempts/3", "NoJobError",
               setup=mine, note="no such attempt")
    yield case(f"GET {key}/job-attempts/{{attempt}}", 404, "/api/v2/jobs/admin~j/job-attempts/3", "NoJobError",
               setup=mine, note="no such attempt")
    yield case(f"GET {key}/attempts/{{attempt}}/taskRoles/{{role}}/taskIndex/{{index}}/attempts/{{task_attempt}}/logs",
               404, "/api/v2/jobs/admin~j/attempts/0/taskRoles/w/taskIndex/0/attempts/0/logs", "NoTaskLogError",
               setup=mine)
    yield case(f"GET {key}/job-attempts/healthz", 200, "/api/v2/jobs/admin~nope/job-attempts/healthz")
    yield case(f"GET {key}/events", 200, "/api/v2/jobs/admin~j/events?type=Warning", setup=mine, note="Warning")
    yield case(f"GET {key}/events", 400, "/api/v2/jobs/admin~j/events?type=Bad", "InvalidParametersError")
    yield case(f"GET {key}/ssh", 404, "/api/v2/jobs/admin~j/ssh", "NoJobSshInfoError", setup=mine)
    yield case(f"GET {key}/ssh", 200, "/api/v2/jobs/admin~s/ssh", setup=("ssh-job",))
    for file, forbidden in (("id_rsa", ()), ("id_rsa.pub", private)):
        op = f"GET {key}/ssh/{file}"
        yield case(op, 200, f"/api/v2/jobs/admin~s/ssh/{file}", setup=("ssh-job",))
        yield case(op, 403, f"/api/v2/jobs/admin~s/ssh/{file}", "ForbiddenUserError", as_="bob",
                   setup=("ssh-job", *forbidden))
        yield case(op, 404, f"/api/v2/jobs/admin~j/ssh/{file}", "NoJobSshInfoError", setup=mine)
        yield case(op, 404, f"/api/v2/jobs/admin~nope/ssh/{file}", "NoJobError")
    logs = f"GET {key}/tasks/{{role}}/{{index}}/logs/{{stream}}"
    yield case(logs, 200, "/api/v2/jobs/admin~r/tasks/w/0/logs/stderr?tail=3", setup=("running",), note="tail")
    yield case(logs, 400, "/api/v2/jobs/admin~j/tasks/w/0/logs/stdout?tail=x", "InvalidParametersError")
    yield case(logs, 400, "/api/v2/jobs/admin~j/tasks/w/first/logs/stdout", "InvalidParametersError",
               note="index")
    yield case(logs, 404, "/api/v2/jobs/admin~j/tasks/w/0/logs/stdout", "NoTaskLogError", setup=mine,
               note="no attempt yet")
    yield case(logs, 404, "/api/v2/jobs/admin~j/tasks/nosuch/0/logs/stdout?follow=true", "NoTaskRoleError",
               setup=mine, note="no such role")
    yield case(logs, 400, "/api/v2/jobs/admin~j/tasks/w/0/logs/stdout?follow=true&since=yesterday",
               "InvalidParametersError", note="since")
    exe = f"GET {key}/tasks/{{role}}/{{index}}/exec"
    yield case(exe, 101, "/api/v2/jobs/admin~r/tasks/w/0/exec?cmd=true", setup=("listening",), websocket=True)
    yield case(exe, 400, "/api/v2/jobs/admin~r/tasks/w/0/exec", "InvalidParametersError", note="no cmd")
    yield case(exe, 403, "/api/v2/jobs/admin~j/tasks/w/0/exec?cmd=true", "ForbiddenUserError", as_="bob", setup=mine,
               websocket=True, note="a reader who is not the owner")
    yield case(exe, 403, "/api/v2/jobs/admin~j/tasks/w/0/exec?cmd=true", "ForbiddenUserError", as_="bob",
               setup=("job", "private", "bob"), websocket=True, note="may not read")
    yield case(exe, 404, "/api/v2/jobs/admin~nope/tasks/w/0/exec?cmd=true", "NoJobError", websocket=True)
    yield case(exe, 404, "/api/v2/jobs/admin~j/tasks/w/1/exec?cmd=true", "NoTaskRoleError", setup=mine,
               websocket=True)
    yield case(exe, 409, "/api/v2/jobs/admin~j/tasks/w/0/exec?cmd=true", "TaskNotRunningError", setup=mine,
               websocket=True)
    yield case(exe, 429, "/api/v2/jobs/admin~r/tasks/w/0/exec?cmd=true", "TooManySessionsError", setup=("full",),
               websocket=True)
    yield case(exe, 502, "/api/v2/jobs/admin~r/tasks/w/0/exec?cmd=fail", "NodeUnavailableError", setup=("listening",),
               websocket=True)


def _job_changes() -> Iterator[Case]:
    key = "/api/v2/jobs/{key}"
    changes: list[tuple[str, str, int, dict[str, Any], dict[str, Any]]] = [
        # (operation, URL of admin~{}, success, a body that works, a body that does not)
        (f"PUT {key}/executionType", "/api/v2/jobs/admin~{}/executionType", 202, {"value": "STOP"},
         {"value": "PAUSE"}),
        ("PUT /api/v1/user/{user}/jobs/{name}/executionType", "/api/v1/user/admin/jobs/{}/executionType", 202,
         {"value": "STOP"}, {"value": "START"}),
        (f"PUT {key}/priority", "/api/v2/jobs/admin~{}/priority", 202, {"value": "prod"}, {"value": "gold"}),
        (f"PUT {key}/tag", "/api/v2/jobs/admin~{}/tag", 200, {"value": "baseline"}, {"value": ""}),
        (f"DELETE {key}/tag", "/api/v2/jobs/admin~{}/tag", 200, {"value": "baseline"}, {}),
    ]
    for op, url, ok, good, bad in changes:
        yield case(op, ok, url.format("j"), json_body=good, setup=("job",))
        yield case(op, 400, url.format("j"), "InvalidParametersError", json_body=bad, setup=("job",))
        yield case(op, 403, url.format("j"), "ForbiddenUserError", as_="bob", json_body=good, setup=("job",))
        yield case(op, 404, url.format("nope"), "NoJobError", json_body=good)
    yield case(f"PUT {key}/executionType", 202, "/api/v2/jobs/admin~e/executionType", json_body={"value": "STOP"},
               setup=("ended",), note="already ended")
    yield case(f"PUT {key}/priority", 400, "/api/v2/jobs/admin~e/priority", "InvalidParametersError",
               json_body={"value": "prod"}, setup=("ended",), note="ended")
    for op, url in (("DELETE /api/v1/jobs/{job}", "/api/v1/jobs/admin~{}"),
                    ("DELETE /api/v1/user/{user}/jobs/{name}", "/api/v1/user/admin/jobs/{}")):
        yield case(op, 202, url.format("e"), setup=("ended",))
        yield case(op, 403, url.format("e"), "ForbiddenUserError", as_="bob", setup=("ended",))
        yield case(op, 404, url.format("nope"), "NoJobError")
        yield case(op, 409, url.format("j"), "ConflictJobError", setup=("job",))


def _cluster() -> Iterator[Case]:
    yield case("GET /api/v2/nodes", 200, setup=("node",))
    yield case("GET /api/v2/masters", 200, check=lambda a: _same(
        [(m["role"], m["self"]) for m in a.body], [("leader", True)]))  # SQLite: this master, leading
    state = "PUT /api/v2/nodes/{node}/state"
    yield case(state, 200, "/api/v2/nodes/n1/state", json_body={"value": "CORDONED"}, setup=("node",))
    yield case(state, 400, "/api/v2/nodes/n1/state", "InvalidParametersError", json_body={"value": "LOST"},
               setup=("node",))
    yield case(state, 403, "/api/v2/nodes/n1/state", "ForbiddenUserError", as_="bob", json_body={"value": "READY"})
    yield case(state, 404, "/api/v2/nodes/nope/state", "NoNodeError", json_body={"value": "READY"})
    yield case("GET /api/v2/cluster/sku-types", 200)
    yield case("GET /api/v2/cluster/sku-types", 404, "/api/v2/cluster/sku-types?vc=nope", "NoVirtualClusterError")
    yield case("GET /api/v2/virtual-clusters/{vc}/sku-types", 200, "/api/v2/virtual-clusters/default/sku-types")
    yield case("GET /api/v2/virtual-clusters/{vc}/sku-types", 404, "/api/v2/virtual-clusters/nope/sku-types",
               "NoVirtualClusterError")
    yield case("GET /api/v2/cluster/job-counts", 200, setup=("job",))
    history = "GET /api/v2/virtual-clusters/{vc}/usage-history"
    yield case(history, 200, "/api/v2/virtual-clusters/default/usage-history?hours=2")
    yield case(history, 400, "/api/v2/virtual-clusters/default/usage-history?hours=0", "InvalidParametersError")
    yield case(history, 404, "/api/v2/virtual-clusters/nope/usage-history", "NoVirtualClusterError")
    queue = "GET /api/v2/virtual-clusters/{vc}/queue"
    yield case(queue, 200, "/api/v2/virtual-clusters/default/queue?limit=5", setup=("job",))
    yield case(queue, 400, "/api/v2/virtual-clusters/default/queue?limit=1001", "InvalidParametersError")
    yield case(queue, 404, "/api/v2/virtual-clusters/nope/queue", "NoVirtualClusterError")
    yield case("GET /api/v2/storages", 200, setup=("storage",))
    yield case("GET /api/v2/storages/{name}", 200, "/api/v2/storages/data", setup=("storage",))
    yield case("GET /api/v2/storages/{name}", 404, "/api/v2/storages/nope", "NoStorageError")
    one = "/api/v2/storages/{name}"
    yield case(f"PUT {one}", 201, "/api/v2/storages/data",
               json_body={"name": "data", "path": "/nfs/data2", "readOnly": True})
    yield case(f"PUT {one}", 400, "/api/v2/storages/data", "InvalidParametersError", json_body={"path": "nfs"})
    yield case(f"PUT {one}", 403, "/api/v2/storages/data", "ForbiddenUserError", as_="bob",
               json_body={"path": "/nfs/data"})
    yield case(f"DELETE {one}", 200, "/api/v2/storages/data", setup=("storage",))
    yield case(f"DELETE {one}", 403, "/api/v2/storages/data", "ForbiddenUserError", as_="bob", setup=("storage",))
    yield case(f"DELETE {one}", 404, "/api/v2/storages/nope", "NoStorageError")


def _vcs() -> Iterator[Case]:
    for v in ("v1", "v2"):
        base = f"/api/{v}/virtual-clusters"
        one = f"{base}/{{vc}}"
        yield case(f"GET {base}", 200, setup=("team",))
        yield case(f"GET {one}", 200, f"{base}/default")
        yield case(f"GET {one}", 404, f"{base}/nope", "NoVirtualClusterError")
        yield case(f"PUT {one}", 201, f"{base}/team", json_body={"vcCapacity": 10, "vcMaxCapacity": 50})
        yield case(f"PUT {one}", 400, f"{base}/team", "InvalidParametersError", json_body={"vcCapacity": 101})
        yield case(f"PUT {one}", 403, f"{base}/team", "ForbiddenUserError", as_="bob", json_body={"vcCapacity": 10})
        yield case(f"PUT {one}/status", 201, f"{base}/default/status", json_body={"vcStatus": "draining"})
        yield case(f"PUT {one}/status", 400, f"{base}/default/status", "InvalidParametersError",
                   json_body={"vcStatus": "paused"})
        yield case(f"PUT {one}/status", 403, f"{base}/default/status", "ForbiddenUserError", as_="bob",
                   json_body={"vcStatus": "running"})
        yield case(f"PUT {one}/status", 404, f"{base}/nope/status", "NoVirtualClusterError",
                   json_body={"vcStatus": "running"})
        yield case(f"DELETE {one}", 200, f"{base}/team", setup=("team",))
        yield case(f"DELETE {one}", 400, f"{base}/default", "InvalidParametersError")
        yield case(f"DELETE {one}", 403, f"{base}/team", "ForbiddenUserError", as_="bob", setup=("team",))
        yield case(f"DELETE {one}", 404, f"{base}/nope", "NoVirtualClusterError")
        yield case(f"DELETE {one}", 409, f"{base}/team", "ConflictVirtualClusterError", setup=("team-job",))
    one = "/api/v2/virtual-clusters/{vc}"
    yield case(f"PUT {one}", 201, "/api/v2/virtual-clusters/team", note="pai's form",
               json_body={"name": "team", "guaranteed": {"gpu": 0, "cpu": "10%", "memoryMB": "10%"},
                          "strictFifo": True})
    yield case(f"PUT {one}", 400, "/api/v2/virtual-clusters/team", "InvalidParametersError",
               json_body={"strictfifo": True}, note="pai's form")


def _task_ports() -> Iterator[Case]:
    tunnel = "GET /api/v2/jobs/{key}/tasks/{role}/{index}/ports/{label}/tunnel"
    url = "/api/v2/jobs/admin~{}/tasks/{}/{}/ports/{}/tunnel"
    yield case(tunnel, 101, url.format("r", "w", 0, "http"), setup=("listening",), websocket=True)
    yield case(tunnel, 400, url.format("r", "w", 0, "http"), "InvalidParametersError", setup=("listening",),
               note="not a WebSocket")
    yield case(tunnel, 403, url.format("j", "w", 0, "http"), "ForbiddenUserError", as_="bob", setup=("job", "bob"),
               websocket=True, note="a reader who is not the owner")
    yield case(tunnel, 403, url.format("j", "w", 0, "http"), "ForbiddenUserError", as_="bob",
               setup=("job", "private", "bob"), websocket=True, note="may not read")
    yield case(tunnel, 404, url.format("nope", "w", 0, "http"), "NoJobError", websocket=True)
    yield case(tunnel, 404, url.format("r", "x", 0, "http"), "NoTaskRoleError", setup=("listening",),
               websocket=True)
    yield case(tunnel, 404, url.format("r", "w", 0, "tb"), "NoTaskPortError", setup=("listening",), websocket=True)
    yield case(tunnel, 409, url.format("j", "w", 0, "http"), "TaskNotRunningError", setup=("job",), websocket=True)
    yield case(tunnel, 502, url.format("r", "w", 0, "ssh"), "TaskPortUnreachableError", setup=("listening",),
               websocket=True)
    yield case(tunnel, 429, url.format("r", "w", 0, "http"), "TooManySessionsError", setup=("full",), websocket=True)
    yield case("POST /api/v2/proxy/session", 200)
    yield case("DELETE /api/v2/proxy/session", 200, as_="none")


def in_vc(vc: str) -> dict[str, Any]:
    """admin~lr's document (tests/rest_server/test_experiments.py's), its trials in ``vc``."""
    doc = experiment()
    doc["trial"]["defaults"] = {"virtualCluster": vc}
    return doc


def _experiments() -> Iterator[Case]:
    e = "/api/v2/experiments"
    yield case(f"POST {e}", 202, body=yaml.safe_dump(experiment()), content_type="text/yaml")
    yield case(f"POST {e}", 202, json_body=experiment(), note="JSON")
    yield case(f"POST {e}", 200, f"{e}?dryRun=true", json_body=experiment(), note="dry run")
    yield case(f"POST {e}", 409, f"{e}?dryRun=true", "ConflictExperimentError", json_body=experiment(),
               setup=("experiment",), note="dry run")
    yield case(f"POST {e}", 400, code="InvalidProtocolError", json_body={**experiment(), "searcher": {"name": "grid"}})
    yield case(f"POST {e}", 400, code="InvalidParametersError", json_body=in_vc("team"), setup=("stopped-team",),
               note="a stopped VC")
    yield case(f"POST {e}", 403, code="ForbiddenUserError", as_="bob", json_body=in_vc("team"), setup=("team",),
               note="a VC not granted")
    yield case(f"POST {e}", 404, code="NoVirtualClusterError", json_body=in_vc("nope"))
    yield case(f"POST {e}", 409, code="ConflictExperimentError", json_body=experiment(), setup=("experiment",))
    yield case(f"GET {e}", 200, setup=("reported",), check=lambda a: _same(
        [(x["key"], x["bestTrial"]["metric"]) for x in a.body], [("admin~lr", {"step": 1, "value": 0.5})]))
    yield case(f"GET {e}", 200, f"{e}?username=admin", as_="bob", setup=("experiment", "private"),
               note="only those bob may read", check=lambda a: _same(a.body, []))
    one = f"{e}/{{key}}"
    yield case(f"GET {one}", 200, f"{e}/admin~lr", setup=("reported",))
    yield case(f"GET {one}", 403, f"{e}/admin~lr", "ForbiddenUserError", as_="bob",
               setup=("experiment", "private", "bob"))
    yield case(f"GET {one}", 404, f"{e}/admin~nope", "NoExperimentError")
    stop, url, body = f"PUT {one}/executionType", f"{e}/admin~lr/executionType", {"value": "STOP"}
    yield case(stop, 202, url, json_body=body, setup=("experiment",))
    yield case(stop, 400, url, "InvalidParametersError", json_body={"value": "START"}, setup=("experiment",))
    yield case(stop, 403, url, "ForbiddenUserError", as_="bob", json_body=body, setup=("experiment",))
    yield case(stop, 404, f"{e}/admin~nope/executionType", "NoExperimentError", json_body=body)


def _trials() -> Iterator[Case]:
    t, mine, private = "/api/v2/trials/{trial}", ("trials",), ("trials", "private", "bob")
    posts: list[tuple[str, dict[str, Any], dict[str, Any]]] = [  # (what, a body that works, one that does not)
        ("metrics", {"step": 1, "metrics": {"loss": 0.5}}, {"step": 1, "metrics": {"loss": "low"}}),
        ("checkpoints", {"step": 1, "path": "/ckpt/1.pt", "metadata": {}}, {"step": 1, "path": 5}),
    ]
    for what, good, bad in posts:
        op, url = f"POST {t}/{what}", f"/api/v2/trials/{{t0}}/{what}"
        yield case(op, 200, url, json_body=good, as_="trial0", setup=mine)
        yield case(op, 400, url, "InvalidParametersError", json_body=bad, as_="trial0", setup=mine)
        yield case(op, 403, url, "ForbiddenUserError", json_body=good, as_="trial1", setup=mine,
                   note="another trial's token")
        yield case(op, 403, url, "ForbiddenUserError", json_body=good, setup=mine, note="a user's token")
        yield case(op, 403, f"/api/v2/trials/999999/{what}", "ForbiddenUserError", json_body=good,
                   note="a user's token, whether or not the trial exists")
    for what, ready in (("metrics", "reported"), ("checkpoints", "checkpoint"), ("checkpoints/latest", "checkpoint")):
        op, url = f"GET {t}/{what}", f"/api/v2/trials/{{t0}}/{what}"
        yield case(op, 200, url, setup=(ready,))
        yield case(op, 200, url, as_="trial0", setup=(ready,), note="the trial's own token")
        yield case(op, 403, url, "ForbiddenUserError", as_="bob", setup=private)
        yield case(op, 403, url, "ForbiddenUserError", as_="trial1", setup=mine, note="another trial's token")
        yield case(op, 404, f"/api/v2/trials/999999/{what}", "NoTrialError")
    yield case(f"GET {t}/metrics", 200, "/api/v2/trials/{t0}/metrics?name=loss", setup=("reported",), note="one",
               check=lambda a: _same(a.body["metrics"], {"loss": [[1, 0.5]]}))
    yield case(f"GET {t}/checkpoints/latest", 200, "/api/v2/trials/{t1}/checkpoints/latest", setup=mine,
               note="none yet", check=lambda a: _same(a.body, None))


CASES = [*_service(), *_auth(), *_users(), *_groups(), *_submissions(), *_job_reads(), *_job_changes(), *_cluster(),
         *_vcs(), *_task_ports(), *_experiments(), *_trials()]


# ---- the tests -----------------------------------------------------------------------------------------------

def test_the_document_is_valid_openapi() -> None:
    validate(DOC)
    assert DOC["openapi"].startswith("3.")


def is_public_api(path: str) -> bool:
    """The REST API the document describes: all but the agents' /api/internal/, the dashboard's pages, the
    Prometheus endpoints and the proxy to tasks' ports (the tasks' own APIs), which are served beside it and are not
    part of it."""
    return not (path.startswith(("/api/internal/", "/dashboard/", "/metrics", "/proxy/")) or path == "/")


def test_every_public_route_is_an_operation_and_every_operation_a_route() -> None:
    routed = {(r.method, route_path(r.path)) for r in routes if is_public_api(r.path)}
    ops = set(documented())
    assert sorted(routed - ops) == [], "routes the document lacks"
    assert sorted(ops - routed) == [], "operations that are no route"
    assert not [p for p in DOC["paths"] if p.startswith("/api/internal/")]


def test_the_cases_cover_exactly_the_documented_answers_and_codes() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    ops = documented()
    listed = {(m, p, int(s)) for (m, p), op in ops.items() for s in op["responses"]}
    unauthorized = {(m, p, 401) for (m, p), op in ops.items() if needs_token(op)}
    covered = {(c.method, c.path, c.status) for c in CASES} | unauthorized
    assert sorted(covered - listed) == [], "answers the master gives and the document does not list"
    assert sorted(listed - covered) == [], "documented answers no case produces"
    for (m, p), op in ops.items():
        assert ("401" in op["responses"]) == needs_token(op), f"{m} {p}: 401 iff it needs a token"
        for status in op["responses"]:
            if int(status) < 400:
                continue
            named = set(CODE.findall(response(m, p, int(status))["description"]))
            got = {c.code for c in CASES if (c.method, c.path, c.status) == (m, p, int(status))}
            if int(status) == 401:
                got.add("UnauthorizedUserError")
            assert named == got, f"{m} {p} {status}: the description names {sorted(named)}, cases get {sorted(got)}"
    for c in CASES:
        assert (c.code is None) == (c.status < 400), c.id


@pytest.mark.parametrize("c", [pytest.param(c, id=c.id) for c in CASES])
async def test_a_documented_answer_occurs(api: Api, c: Case) -> None:
    world = World(api)
    try:
        for what in c.setup:
            await world.setup(what)
        token = await world.token(c.as_)
        url = world.url(c.url)
        answer = await world.request(c.method, url, token=token, json_body=c.json_body, body=c.body,
                                     content_type=c.content_type, websocket=c.websocket)
    finally:
        await world.close()
    assert answer.status == c.status, answer.body
    if c.status == 101:  # switched to the WebSocket: no HTTP body
        return
    documented_answer = response(c.method, c.path, c.status)
    content = documented_answer.get("content", {})
    assert answer.content_type in content, f"{answer.content_type} is not documented for {c.id}: {list(content)}"
    body = yaml.safe_load(answer.body) if answer.content_type == "text/yaml" else answer.body
    check_schema(body, content[answer.content_type]["schema"], c.id)
    if c.code is not None:
        assert answer.body["code"] == c.code, answer.body
    if c.status < 300:
        _check_request_body(c)
    if c.check is not None:
        c.check(answer)


def _check_request_body(c: Case) -> None:
    """What a successful case sent is valid against the request schema the document gives."""
    request_body = documented()[c.method, c.path].get("requestBody")
    if c.json_body is None and c.body is None:
        assert request_body is None or not request_body.get("required"), f"{c.id}: the body is required"
        return
    assert request_body is not None, f"{c.id}: the document takes no body"
    content_type = c.content_type or "application/json"
    assert content_type in request_body["content"], f"{c.id}: {content_type} is not documented"
    if content_type == "application/x-www-form-urlencoded":
        return  # a form's values are text; the handler reads them as the JSON they stand for
    sent = c.json_body if c.json_body is not None else yaml.safe_load(c.body or "")
    check_schema(sent, request_body["content"][content_type]["schema"], f"{c.id} (request)")


SAMPLES = {"key": "admin~nope", "job": "admin~nope", "user": "admin", "name": "nope", "group": "default",
           "vc": "default", "attempt": "0", "index": "0", "task_attempt": "0", "role": "w", "stream": "stdout",
           "token": "nope", "node": "n1", "attr": "acls", "label": "http", "trial": "1"}


async def test_without_a_token_exactly_the_documented_operations_answer_401(api: Api) -> None:
    for (method, path), op in documented().items():
        url = re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m.group(1)], path)
        resp = await api.client.request(method, url, json={})
        if needs_token(op):
            assert resp.status == 401, f"{method} {path}: {resp.status}"
            body = await resp.json()
            assert body["code"] == "UnauthorizedUserError"
            check_schema(body, response(method, path, 401)["content"]["application/json"]["schema"], path)
        else:
            assert resp.status != 401, f"{method} {path} needs no token"


async def test_the_document_is_served_without_a_token(api: Api) -> None:
    resp = await api.client.get("/api/v2/openapi.json/")
    assert resp.status == 200 and resp.content_type == "application/json"
    served = await resp.json()
    validate(served)
    assert served["info"]["version"] == DOC["info"]["version"] != "filled-in-by-the-master"
    assert "x-embed" not in json.dumps(served)
