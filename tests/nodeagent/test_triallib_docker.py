"""A trial's container finds the agent's pai_trial read-only at /usr/local/pai/python, first on its PYTHONPATH, and
the master's URL (issue 29), against a real Docker Engine (tests/dockerkit.py; its busybox image has no python, so
the checks are the shell's)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import docker
import docker.errors
import pytest

import pai_trial
from pai.domain.resources import Resources
from pai.nodeagent.docker_runtime import DockerRuntime
from pai.nodeagent.triallib import TrialLib
from pai.protocol import ContainerReport, ContainerStatus, StartTask
from tests.dockerkit import IMAGE, busybox_rootfs
from tests.eventually import eventually
from tests.nodeagent.builders import report_of, start_task
from tests.nodeagent.fake_master import FakeMaster
from tests.nodeagent.test_agent import config, reported, running

TRIAL = {"PAI_TRIAL_ID": "t-7", "PAI_TRIAL_TOKEN": "tok", "PAI_TRIAL_HPARAMS": "{}"}
IMAGE_WITH_PATH = "pai-test/busybox-pythonpath:1"
# What the task sees: its PYTHONPATH, the first line of pai_trial, whether it may write there, the files.
LOOK = ('echo "${PYTHONPATH-unset}"; d=/usr/local/pai/python; head -n 1 $d/pai_trial/__init__.py || echo absent; '
        "touch $d/pai_trial/x 2>/dev/null && echo writable || echo read-only; ls $d/pai_trial")


def task(attempt_id: str, command: str, env: dict[str, str], image: str = IMAGE) -> StartTask:
    return replace(start_task(attempt_id, command, env=env), image=image, resources=Resources(0, 1, 64))


@pytest.fixture(scope="module")
def image_with_path(docker_host: str) -> str:
    client = docker.DockerClient(base_url=docker_host)
    try:
        repository, tag = IMAGE_WITH_PATH.split(":")
        client.api.import_image_from_data(busybox_rootfs(), repository=repository, tag=tag,
                                          changes=["ENV PYTHONPATH=/opt/img"])
    finally:
        client.close()
    return IMAGE_WITH_PATH


@pytest.fixture
async def runtime(tmp_path: Path, docker_host: str) -> AsyncIterator[DockerRuntime]:
    rt = await DockerRuntime.open(tmp_path / "state", base_url=docker_host,
                                  trial_lib=TrialLib(tmp_path / "agent" / "python"))
    yield rt
    for report in rt.reports():
        if report.status is ContainerStatus.RUNNING:
            await rt.stop(report.attempt_id, 0)
    await rt.close()


async def output(rt: DockerRuntime, cmd: StartTask, tmp_path: Path) -> list[str]:
    def exited() -> ContainerReport | None:
        r = report_of(rt.reports(), cmd.attempt_id)
        return r if r is not None and r.status is ContainerStatus.EXITED else None

    await rt.start(cmd, tmp_path / cmd.attempt_id)
    report = await eventually(exited, timeout=20, what=f"{cmd.attempt_id} exited")
    assert report.exit_code == 0, (tmp_path / cmd.attempt_id / "stderr.log").read_text()
    return (tmp_path / cmd.attempt_id / "stdout.log").read_text().splitlines()


def first_line() -> str:
    return Path(pai_trial.__file__).read_text().splitlines()[0]


async def test_a_trial_container_has_pai_trial_read_only_first_on_its_path(
        runtime: DockerRuntime, tmp_path: Path) -> None:
    assert await output(runtime, task("d1", LOOK, TRIAL), tmp_path) == [
        "/usr/local/pai/python", first_line(), "read-only", "__init__.py", "client.py"]


@pytest.mark.parametrize(("env", "path"), [
    pytest.param({}, "/usr/local/pai/python:/opt/img", id="the image's"),
    pytest.param({"PYTHONPATH": "/job/lib"}, "/usr/local/pai/python:/job/lib", id="the job's wins over the image's"),
])
async def test_the_jobs_or_the_images_pythonpath_follows_ours(
        runtime: DockerRuntime, tmp_path: Path, image_with_path: str, env: dict[str, str], path: str) -> None:
    lines = await output(runtime, task("d2", 'echo "$PYTHONPATH"', TRIAL | env, image_with_path), tmp_path)
    assert lines == [path]


async def test_an_image_that_cannot_be_inspected_leaves_just_ours(
        runtime: DockerRuntime, tmp_path: Path, image_with_path: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    inspect, calls = runtime._client.api.inspect_image, []

    def blinks_after_the_pull_checked(image: str) -> object:
        calls.append(image)
        if len(calls) == 1:  # the pull's: the image is there
            return inspect(image)
        raise docker.errors.APIError("the engine blinked")

    monkeypatch.setattr(runtime._client.api, "inspect_image", blinks_after_the_pull_checked)
    assert await output(runtime, task("d5", 'echo "$PYTHONPATH"', TRIAL, image_with_path), tmp_path) == [
        "/usr/local/pai/python"]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == ["image environment unreadable"]


async def test_a_container_of_no_trial_has_no_pai_trial(runtime: DockerRuntime, tmp_path: Path) -> None:
    look = 'echo "${PYTHONPATH-unset}"; ls /usr/local/pai 2>/dev/null || echo absent'
    assert await output(runtime, task("d3", look, {}), tmp_path) == ["unset", "absent"]
    assert not (tmp_path / "agent" / "python").exists()


async def test_the_agent_gives_a_trial_container_the_masters_url(
        tmp_path: Path, master: FakeMaster, docker_host: str) -> None:
    master.send(task("d4", f'echo "$PAI_MASTER_URL"; {LOOK}', TRIAL))
    cfg = config(tmp_path, master.url, runtime="docker", docker_host=docker_host)
    async with running(cfg) as agent:
        exited = await eventually(lambda: reported(master, "d4", ContainerStatus.EXITED), timeout=30, what="exit")
        assert exited.exit_code == 0, (agent.paths.attempt("d4") / "stderr.log").read_text()
        lines = (agent.paths.attempt("d4") / "stdout.log").read_text().splitlines()
    assert lines == [master.url, "/usr/local/pai/python", first_line(), "read-only", "__init__.py", "client.py"]
