"""Image pulls with a real Docker Engine (tests/dockerkit.py): "the registry says there is no such image" (-101,
permanent) told from "the registry could not be asked" (-102, transient, asked again within the attempt first).
Registries: Debian's docker-registry (tests/registrykit.py), an address that refuses connections, and a
registry that answers every manifest with an error status (to see the engine's words for 5xx and 429)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
import tarfile
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import docker
import pytest
import requests

from pai.domain.resources import Resources
from pai.nodeagent.docker_runtime import DockerRuntime
from pai.nodeagent.pull import PullRetry
from pai.protocol import ContainerReport, ContainerStatus, PlatformExit, RegistryCredentials, StartTask
from tests.dockerkit import IMAGE, containers_labelled
from tests.eventually import eventually
from tests.nodeagent.builders import report_of, start_task
from tests.registrykit import PASSWORD, USER, Registry

RETRY = PullRetry(tries=3, first_delay=0.05)


def task(attempt_id: str, image: str, auth: RegistryCredentials | None = None) -> StartTask:
    cmd = start_task(attempt_id, "echo ran", env={"PAI_JOB_NAME": "alice~job"})
    return replace(cmd, image=image, resources=Resources(0, 1, 64), registry_auth=auth)


@pytest.fixture
async def runtime(tmp_path: Path, docker_host: str, exits: list[ContainerReport]) -> AsyncIterator[DockerRuntime]:
    rt = await DockerRuntime.open(tmp_path / "state", exits.append, base_url=docker_host, pull_retry=RETRY)
    yield rt
    await rt.close()


async def ended(rt: DockerRuntime, attempt_id: str) -> ContainerReport:
    return await eventually(
        lambda: (r := report_of(rt.reports(), attempt_id)) is not None and r.status is ContainerStatus.EXITED and r,
        timeout=30, what=f"{attempt_id} exited")


def pull_failures(caplog: pytest.LogCaptureFixture, attempt_id: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if r.getMessage() == "image pull failed" and getattr(r, "attempt", "") == attempt_id]


def closed_port() -> int:
    with socket.socket() as s:  # bound, never listening, then closed: connections to it are refused
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_image_the_registry_does_not_have_fails_permanently_at_once(
        runtime: DockerRuntime, tmp_path: Path, docker_registry: Registry, caplog: pytest.LogCaptureFixture) -> None:
    image = f"{docker_registry.address}/pai-test/absent:1"
    auth = RegistryCredentials(USER, PASSWORD, docker_registry.address)
    await runtime.start(task("p1", image, auth), tmp_path / "p1")
    report = await ended(runtime, "p1")
    assert report.exit_code == PlatformExit.IMAGE_NOT_FOUND
    assert report.reason == (f"image {image!r} does not exist (manifest unknown): manifest for {image} not found: "
                             "manifest unknown: manifest unknown")  # the engine's words, quoted
    assert len(pull_failures(caplog, "p1")) == 1  # the registry's answer: not asked again


async def test_a_registry_that_refuses_connections_is_asked_again_then_the_attempt_ends_transient(
        runtime: DockerRuntime, tmp_path: Path, caplog: pytest.LogCaptureFixture, docker_host: str) -> None:
    image = f"127.0.0.1:{closed_port()}/img:tag"
    await runtime.start(task("p2", image), tmp_path / "p2")
    report = await ended(runtime, "p2")
    assert report.exit_code == PlatformExit.IMAGE_PULL_FAILED
    reason = report.reason or ""
    assert reason.startswith(f"image {image!r} could not be pulled (connection failed, 3 tries): ")
    assert "connect: connection refused" in reason  # the engine's words
    assert [getattr(r, "try") for r in pull_failures(caplog, "p2")] == [1, 2, 3]  # asked 3 times
    assert containers_labelled(docker_host, "pai.attempt=p2") == []


@dataclass
class Answering:
    """A registry whose manifests all answer ``status`` with ``body``; counts the manifest requests."""
    address: str
    status: int = 503
    body: dict[str, object] = field(default_factory=dict)
    asked: int = 0


@pytest.fixture
def answering() -> Iterator[Answering]:
    state = Answering("")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = (200, {}) if self.path == "/v2/" else (state.status, state.body)
            if self.path != "/v2/":
                state.asked += 1
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_HEAD = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.address = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def _error(code: str, message: str) -> dict[str, object]:
    return {"errors": [{"code": code, "message": message}]}


ANSWERS = [
    # (name, the registry's status and body, the attempt's exit, whether the registry was asked again)
    ("503 service unavailable", 503, _error("UNAVAILABLE", "down for maintenance"), PlatformExit.IMAGE_PULL_FAILED,
     True),
    ("429 too many requests", 429, _error("TOOMANYREQUESTS", "You have reached your pull rate limit."),
     PlatformExit.IMAGE_PULL_FAILED, True),
    ("500 internal server error", 500, {}, PlatformExit.IMAGE_PULL_FAILED, True),
    ("401 unauthorized", 401, _error("UNAUTHORIZED", "authentication required"), PlatformExit.IMAGE_NOT_FOUND, False),
    ("404 name unknown", 404, _error("NAME_UNKNOWN", "repository name not known to registry"),
     PlatformExit.IMAGE_NOT_FOUND, False),
]


@pytest.mark.parametrize(("name", "status", "body", "code", "again"), ANSWERS, ids=[a[0] for a in ANSWERS])
async def test_the_registrys_answer_decides_whether_the_pull_is_tried_again(
        runtime: DockerRuntime, tmp_path: Path, docker_host: str, answering: Answering, name: str, status: int,
        body: dict[str, object], code: PlatformExit, again: bool) -> None:
    answering.status, answering.body = status, body
    image = f"{answering.address}/team/img:1"
    client = docker.DockerClient(base_url=docker_host)
    try:  # how many manifest requests one pull makes, and what the engine says
        with pytest.raises(docker.errors.APIError) as said:
            client.images.pull(image)
    finally:
        client.close()
    per_pull, answering.asked = answering.asked, 0
    attempt = f"p3-{status}"
    await runtime.start(task(attempt, image), tmp_path / attempt)
    report = await ended(runtime, attempt)
    assert report.exit_code == code
    assert str(said.value.explanation) in (report.reason or "")  # the engine's words, quoted
    assert answering.asked == per_pull * (RETRY.tries if again else 1)


async def test_a_layer_the_registry_lost_is_not_a_missing_image(
        runtime: DockerRuntime, tmp_path: Path, docker_host: str, docker_registry: Registry) -> None:
    """The pull breaks after its first progress line: the engine says so in the stream (docker SDK's
    ``images.pull`` dropped that line and then said "no such image")."""
    image = f"{docker_registry.address}/pai-test/broken-{uuid.uuid4().hex[:8]}"
    creds = {"username": USER, "password": PASSWORD}
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:  # a layer the engine does not have yet
        content = uuid.uuid4().bytes * 100
        info = tarfile.TarInfo("payload")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    client = docker.DockerClient(base_url=docker_host)
    try:
        client.api.import_image_from_data(layer.getvalue(), repository=image, tag="1")
        for line in client.images.push(image, "1", stream=True, decode=True, auth_config=creds):
            assert "error" not in line, line
        client.images.remove(f"{image}:1")
    finally:
        client.close()
    manifest = requests.get(f"http://{docker_registry.address}/v2/{image.split('/', 1)[1]}/manifests/1",
                            auth=(USER, PASSWORD), timeout=10,
                            headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"}).json()
    digest = manifest["layers"][0]["digest"].split(":")[1]
    blob = docker_registry.root / "data/docker/registry/v2/blobs/sha256" / digest[:2] / digest / "data"
    blob.unlink()
    auth = RegistryCredentials(USER, PASSWORD, docker_registry.address)
    await runtime.start(task("p4", f"{image}:1", auth), tmp_path / "p4")
    report = await ended(runtime, "p4")
    assert report.exit_code == PlatformExit.IMAGE_PULL_FAILED
    assert "(layer missing in the registry, 3 tries): unknown blob" in (report.reason or "")


async def test_a_stop_while_the_registry_is_asked_again_ends_the_attempt_without_a_container(
        tmp_path: Path, docker_host: str, caplog: pytest.LogCaptureFixture) -> None:
    rt = await DockerRuntime.open(tmp_path / "state", base_url=docker_host,
                                  pull_retry=PullRetry(tries=5, first_delay=600))
    try:
        starting = asyncio.create_task(rt.start(task("p5", f"127.0.0.1:{closed_port()}/img:1"), tmp_path / "p5"))
        await eventually(lambda: pull_failures(caplog, "p5"), what="the first pull failed")
        await asyncio.wait_for(rt.stop("p5", 5, int(PlatformExit.STOPPED), "stopped by alice"), 10)
        await asyncio.wait_for(starting, 5)
        report = report_of(rt.reports(), "p5")
        assert report is not None and (report.exit_code, report.reason) == (PlatformExit.STOPPED, "stopped by alice")
        assert len(pull_failures(caplog, "p5")) == 1 and containers_labelled(docker_host, "pai.attempt=p5") == []
    finally:
        await rt.close()


async def test_an_image_on_the_node_is_not_pulled(runtime: DockerRuntime, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    await runtime.start(task("p6", IMAGE), tmp_path / "p6")
    assert (await ended(runtime, "p6")).exit_code == 0
    assert not [r for r in caplog.records if r.getMessage().startswith("image pull")]
