"""The docker runtime against a real Docker Engine (tests/dockerkit.py): containers, limits, GPUs by
environment, stops, logs on the node, and an agent restart that re-adopts its containers. Image pulls that fail:
test_docker_pull.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import docker
import pytest

from pai.domain.resources import Resources
from pai.nodeagent import members
from pai.nodeagent.docker_runtime import DockerRuntime
from pai.nodeagent.runtime import TaskUsage
from pai.protocol import ContainerReport, ContainerStatus, PlatformExit, RegistryCredentials, StartTask, VolumeMount
from pai.protocol.members import JobMembers, Member
from tests.dockerkit import IMAGE, containers_labelled
from tests.eventually import eventually
from tests.nodeagent.builders import report_of, start_task, stop_task
from tests.registrykit import PASSWORD, USER, Registry


def task(attempt_id: str, command: str, **changes: object) -> StartTask:
    cmd = replace(start_task(attempt_id, command, env={"PAI_JOB_NAME": "alice~job", "PAI_TASK_INDEX": "0"}),
                  image=IMAGE, resources=Resources(0, 1, 64))
    return replace(cmd, **changes)  # type: ignore[arg-type]


@pytest.fixture
async def runtime(tmp_path: Path, docker_host: str, exits: list[ContainerReport]) -> AsyncIterator[DockerRuntime]:
    rt = await DockerRuntime.open(tmp_path / "state", exits.append, base_url=docker_host)
    yield rt
    for report in rt.reports():
        if report.status is ContainerStatus.RUNNING:
            await rt.stop(report.attempt_id, 0)
    await rt.close()


async def ended(rt: DockerRuntime, attempt_id: str) -> ContainerReport:
    return await eventually(
        lambda: (r := report_of(rt.reports(), attempt_id)) is not None and r.status is ContainerStatus.EXITED and r,
        timeout=20, what=f"{attempt_id} exited")


def out(tmp_path: Path, attempt_id: str, stream: str = "stdout") -> str:
    return (tmp_path / attempt_id / f"{stream}.log").read_text()


def containers(docker_host: str, attempt_id: str) -> list[str]:
    return containers_labelled(docker_host, f"pai.attempt={attempt_id}")


def status(docker_host: str, name: str) -> str:
    client = docker.DockerClient(base_url=docker_host)
    try:
        return str(client.api.inspect_container(name)["State"]["Status"])
    finally:
        client.close()


async def test_a_container_runs_the_command_with_the_environment_and_is_removed(
        runtime: DockerRuntime, tmp_path: Path, docker_host: str, exits: list[ContainerReport]) -> None:
    cmd = task("d1", 'echo "job=$PAI_JOB_NAME nv=$NVIDIA_VISIBLE_DEVICES work=$PAI_WORK_DIR cwd=$(pwd)"; '
                     'echo oops >&2; exit 3')
    await runtime.start(cmd, tmp_path / "d1")
    report = await ended(runtime, "d1")
    assert report.exit_code == 3
    assert out(tmp_path, "d1") == "job=alice~job nv=none work=/pai/work cwd=/pai/work\n"
    assert out(tmp_path, "d1", "stderr") == "oops\n"
    assert [e.attempt_id for e in exits] == ["d1"]
    await eventually(lambda: containers(docker_host, "d1") == [], what="the container removed")


async def test_limits_shm_and_gpus_reach_the_container(runtime: DockerRuntime, tmp_path: Path) -> None:
    cmd = task("d2", "df -m /dev/shm | tail -n 1; echo nv=$NVIDIA_VISIBLE_DEVICES; cat /proc/1/cmdline | head -c 40",
               shm_mb=96, gpus=(1, 3))
    await runtime.start(cmd, tmp_path / "d2")
    assert (await ended(runtime, "d2")).exit_code == 0
    lines = out(tmp_path, "d2").splitlines()
    assert lines[0].split()[1] == "96"  # /dev/shm really has shmMB
    assert lines[1] == "nv=1,3"  # exactly the assigned GPUs (configured GPUs: no device to request here)
    assert "init" in lines[2]  # docker's init is PID 1, so that signals reach the command


async def test_a_task_over_its_memory_is_reported_out_of_memory(runtime: DockerRuntime, tmp_path: Path) -> None:
    await runtime.start(task("d3", "dd if=/dev/zero of=/dev/null bs=200M count=1", resources=Resources(0, 1, 32)),
                        tmp_path / "d3")
    report = await ended(runtime, "d3")
    assert report.exit_code == PlatformExit.OOM_KILLED and "memoryMB" in (report.reason or "")


async def test_code_is_read_only_and_the_work_directory_writable(runtime: DockerRuntime, tmp_path: Path) -> None:
    (tmp_path / "d4" / "code").mkdir(parents=True)
    (tmp_path / "d4" / "code" / "train.sh").write_text("echo training\n")
    await runtime.start(task("d4", "sh train.sh; pwd; touch x 2>/dev/null || echo read-only; "
                                   "touch $PAI_WORK_DIR/y && echo writable"), tmp_path / "d4")
    assert (await ended(runtime, "d4")).exit_code == 0
    assert out(tmp_path, "d4") == "training\n/pai/code\nread-only\nwritable\n"
    assert (tmp_path / "d4" / "work" / "y").exists()


async def test_stop_sends_sigterm_then_the_stops_code(runtime: DockerRuntime, tmp_path: Path,
                                                      docker_host: str) -> None:
    await runtime.start(task("d6", "trap 'echo got TERM; exit 0' TERM; echo ready; sleep 600 & wait"),
                        tmp_path / "d6")
    await eventually(lambda: "ready" in out(tmp_path, "d6"), what="the command running")
    stop = stop_task("d6", grace=10)
    await runtime.stop(stop.attempt_id, stop.grace_seconds, stop.exit_code, stop.reason)
    report = report_of(runtime.reports(), "d6")
    assert report is not None and (report.exit_code, report.reason) == (PlatformExit.STOPPED, "stopped by the user")
    assert "got TERM" in out(tmp_path, "d6")
    await eventually(lambda: containers(docker_host, "d6") == [], what="no container left")


async def test_a_restarted_runtime_readopts_running_containers_and_reports_exits_with_real_codes(
        tmp_path: Path, docker_host: str) -> None:
    state = tmp_path / "state"
    first = await DockerRuntime.open(state, base_url=docker_host)
    await first.start(task("r1", "sleep 1; exit 7"), tmp_path / "r1")  # ends while no agent runs
    await first.start(task("r2", "echo up; sleep 600"), tmp_path / "r2")
    await first.close()
    await eventually(lambda: status(docker_host, "pai-r1") == "exited", timeout=15,
                     what="r1 exited while no runtime watched")
    second = await DockerRuntime.open(state, base_url=docker_host)
    try:
        r1 = await ended(second, "r1")
        assert r1.exit_code == 7  # the real code, not "lost"
        r2 = report_of(second.reports(), "r2")
        assert r2 is not None and r2.status is ContainerStatus.RUNNING
        await second.stop("r2", 1, int(PlatformExit.STOPPED), "stopped")
        assert (await ended(second, "r2")).exit_code == PlatformExit.STOPPED
    finally:
        await second.close()


async def test_storages_are_mounted_at_their_paths_read_only_where_configured(
        runtime: DockerRuntime, tmp_path: Path) -> None:
    shared, datasets = tmp_path / "nfs-shared", tmp_path / "nfs-datasets"
    shared.mkdir()
    datasets.mkdir()
    (datasets / "train.csv").write_text("1,2,3\n")
    mounts = (VolumeMount(str(shared), "/mnt/shared", False, "shared"),
              VolumeMount(str(datasets), "/data", True, "datasets"))
    await runtime.start(task("d10", "cat /data/train.csv; touch /data/x 2>/dev/null || echo data read-only; "
                                    "echo from-task > /mnt/shared/out && echo shared writable", mounts=mounts),
                        tmp_path / "d10")
    assert (await ended(runtime, "d10")).exit_code == 0
    assert out(tmp_path, "d10") == "1,2,3\ndata read-only\nshared writable\n"
    assert (shared / "out").read_text() == "from-task\n" and not (datasets / "x").exists()


async def test_secrets_are_files_at_openpais_path_read_only(runtime: DockerRuntime, tmp_path: Path) -> None:
    secrets = {"token": "s3cr3t", "n": 3}
    await runtime.start(task("d15", 'echo "dir=$PAI_SECRET_DIR"; cat /usr/local/pai/secrets/token; echo; '
                                    "cat /usr/local/pai/secrets/secrets.yaml; "
                                    "touch /usr/local/pai/secrets/x 2>/dev/null || echo read-only",
                             secrets=secrets), tmp_path / "d15")
    assert (await ended(runtime, "d15")).exit_code == 0
    assert out(tmp_path, "d15") == "dir=/usr/local/pai/secrets\ns3cr3t\ntoken: s3cr3t\nn: 3\nread-only\n"
    assert not (tmp_path / "d15" / "secrets").exists()  # gone from the node once the attempt ended


async def test_an_elastic_jobs_members_file_is_read_only_inside_and_seen_when_replaced(
        runtime: DockerRuntime, tmp_path: Path) -> None:
    one = JobMembers("alice~job", {"w": (Member(0, "10.0.0.1"),)})
    two = JobMembers("alice~job", {"w": (Member(0, "10.0.0.1"), Member(1, "10.0.0.2"))})
    members.write(tmp_path / "d16", one)  # the supervisor writes it before the start
    await runtime.start(task("d16", 'f="$PAI_ELASTIC_MEMBERS_FILE"; echo "$f"; cat "$f"; echo; '
                                    "until grep -q '\"index\":1' \"$f\"; do sleep 0.1; done; "
                                    'touch /usr/local/pai/elastic/x 2>/dev/null || echo read-only',
                             members=one), tmp_path / "d16")
    await eventually(lambda: "10.0.0.1" in out(tmp_path, "d16"), what="the first members read")
    members.write(tmp_path / "d16", two)  # a reply's: replaced by a rename, seen through the bound directory
    assert (await ended(runtime, "d16")).exit_code == 0
    lines = out(tmp_path, "d16").splitlines()
    assert lines[0] == "/usr/local/pai/elastic/members.json"
    assert json.loads(lines[1]) == one.document() and lines[-1] == "read-only"


async def test_a_storage_missing_on_the_node_fails_the_attempt_saying_which(
        runtime: DockerRuntime, tmp_path: Path, docker_host: str) -> None:
    mounts = (VolumeMount(str(tmp_path / "not-mounted"), "/mnt/team", False, "team"),)
    await runtime.start(task("d11", "true", mounts=mounts), tmp_path / "d11")
    report = await ended(runtime, "d11")
    assert report.exit_code == PlatformExit.STORAGE_UNAVAILABLE
    assert "storage 'team'" in (report.reason or "") and "not-mounted" in (report.reason or "")
    assert containers(docker_host, "d11") == []


@pytest.fixture(scope="module")
def private_image(docker_host: str, docker_registry: Registry) -> str:
    """The test image pushed to the password-protected registry, then removed from the engine."""
    name = f"{docker_registry.address}/pai-test/private"
    client = docker.DockerClient(base_url=docker_host)
    try:
        client.images.get(IMAGE).tag(name, "1")
        for line in client.images.push(name, "1", stream=True, decode=True,
                                       auth_config={"username": USER, "password": PASSWORD}):
            assert "error" not in line, line
        client.images.remove(f"{name}:1")
    finally:
        client.close()
    return f"{name}:1"


async def test_a_private_image_is_pulled_with_the_jobs_registry_credentials(
        runtime: DockerRuntime, tmp_path: Path, private_image: str, docker_registry: Registry) -> None:
    await runtime.start(task("d12", "true", image=private_image), tmp_path / "d12")
    refused = await ended(runtime, "d12")  # no credentials: the registry says no, a user error
    assert refused.exit_code == PlatformExit.IMAGE_NOT_FOUND and private_image in (refused.reason or "")
    assert "check the job's registry credentials" in (refused.reason or "")
    assert "no basic auth credentials" in (refused.reason or "")  # the engine's words
    wrong = RegistryCredentials(USER, "wrong", docker_registry.address)
    await runtime.start(task("d13", "true", image=private_image, registry_auth=wrong), tmp_path / "d13")
    assert (await ended(runtime, "d13")).exit_code == PlatformExit.IMAGE_NOT_FOUND
    auth = RegistryCredentials(USER, PASSWORD, docker_registry.address)
    await runtime.start(task("d14", "echo pulled", image=private_image, registry_auth=auth), tmp_path / "d14")
    assert (await ended(runtime, "d14")).exit_code == 0
    assert out(tmp_path, "d14") == "pulled\n"


async def test_usage_is_the_engines_cpu_time_and_memory_of_each_running_container(
        runtime: DockerRuntime, tmp_path: Path) -> None:
    burn = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 30"
    await runtime.start(task("u1", burn, env={"PAI_VIRTUAL_CLUSTER": "dev"}, gpus=(2,)), tmp_path / "u1")

    async def burnt() -> list[TaskUsage] | None:
        usage = await runtime.usage()
        return usage if usage and usage[0].cpu_seconds >= 0.2 else None
    [u] = await eventually(burnt, what="the container's CPU time")
    assert (u.record.attempt_id, u.record.job_key, u.record.vc, u.record.gpus) == ("u1", "alice~job", "dev", (2,))
    assert u.memory_bytes > 0
    await runtime.stop("u1", 0)
    assert await runtime.usage() == []
