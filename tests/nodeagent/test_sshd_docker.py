"""The SSH endpoint of a docker task (a real engine, tests/dockerkit.py; the real OpenSSH client): commands run in the
container, SFTP reads and writes the container's files (and a link the task made does not lead out to the node's),
and jobssh's ~/.ssh is the container's /root/.ssh."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from pai.domain.resources import Resources
from pai.nodeagent.docker_runtime import DockerRuntime
from pai.nodeagent.paths import AgentPaths
from pai.nodeagent.sshd import SshEndpoints
from pai.nodeagent.taskexec import ExecRequest
from pai.protocol import ContainerStatus, SshHost
from tests.dockerkit import IMAGE
from tests.nodeagent.builders import start_task, wait_status
from tests.nodeagent.execkit import collect
from tests.nodeagent.sshkit import (
    ADDRESS,
    Client,
    access,
    client,
    endpoints_for,
    free_port,
    require_client,
    run,
    served,
)


@pytest.fixture
async def runtime(tmp_path: Path, docker_host: str) -> AsyncIterator[DockerRuntime]:
    rt = await DockerRuntime.open(tmp_path / "state", base_url=docker_host)
    yield rt
    for report in rt.reports():
        if report.status is ContainerStatus.RUNNING:
            await rt.stop(report.attempt_id, 0)
    await rt.close()


@pytest.fixture
async def endpoints(tmp_path: Path, runtime: DockerRuntime) -> AsyncIterator[SshEndpoints]:
    require_client()
    found = endpoints_for(AgentPaths(tmp_path / "agent"), runtime)
    await found.start()
    yield found
    await found.close()


async def _task(runtime: DockerRuntime, endpoints: SshEndpoints, tmp_path: Path, user: Client, **over: object) -> int:
    port = free_port()
    cmd = replace(start_task("d1", "sleep 3600", env={"GREETING": "hi from the container"}), image=IMAGE,
                  resources=Resources(0, 1, 64), ports={"ssh": (port,)}, **{"ssh": access(user.public), **over})
    await runtime.start(cmd, tmp_path / "agent" / "attempts" / "d1")
    await wait_status(runtime, "d1", ContainerStatus.RUNNING)
    assert await served(endpoints, runtime, "d1") == port
    return port


async def test_commands_and_files_are_the_containers(runtime: DockerRuntime, endpoints: SshEndpoints,
                                                     tmp_path: Path) -> None:
    user = client(tmp_path / "user")
    port = await _task(runtime, endpoints, tmp_path, user)
    code, out, err = await run(user.ssh(port, 'echo "$GREETING"; pwd; ls /pai/log; exit 4'))
    assert (code, out) == (4, "hi from the container\n/pai/work\nstderr.log\nstdout.log\n"), err
    local = tmp_path / "local.txt"
    local.write_text("sent over sftp\n")
    host_only = tmp_path / "host-only.txt"  # a file of the node, which a link in the container names
    host_only.write_text("the node's own\n")
    pid = int(runtime._client.api.inspect_container("pai-d1")["State"]["Pid"])
    os.symlink(str(host_only), f"/proc/{pid}/root/tmp/link")
    batch = tmp_path / "batch"
    batch.write_text(f"put {local} /tmp/uploaded.txt\nget /pai/log/stdout.log {tmp_path / 'log.txt'}\n"
                     f"-get /tmp/link {tmp_path / 'escaped.txt'}\n")
    code, _, err = await run(["sftp", *user.options(), "-P", str(port), "-b", str(batch), f"someone@{ADDRESS}"])
    assert code == 0, err
    session = await runtime.exec("d1", ExecRequest(("cat", "/tmp/uploaded.txt")))
    assert await collect(session) == (b"sent over sftp\n", b"", 0)  # inside the container
    await session.kill()
    assert not Path("/tmp/uploaded.txt").exists()
    assert (tmp_path / "log.txt").exists()
    assert not (tmp_path / "escaped.txt").exists()  # the link resolves in the container, where there is no such file


async def test_jobssh_layout_is_the_containers_root_ssh(runtime: DockerRuntime, endpoints: SshEndpoints,
                                                        tmp_path: Path) -> None:
    user, job = client(tmp_path / "user"), client(tmp_path / "job", "id_job")
    ssh = access(user.public, job.public, private=job.key.read_text(), public=job.public,
                 hosts=(SshHost("worker-0", ADDRESS, 1234),))
    port = await _task(runtime, endpoints, tmp_path, user, ssh=ssh)
    code, out, err = await run(user.ssh(port, 'echo "$PAI_SSH_DIR"; ls /root/.ssh; grep -c IdentityFile '
                                              '/root/.ssh/config; grep IdentityFile /root/.ssh/config'))
    assert (code, out) == (0, "/root/.ssh\nauthorized_keys\nconfig\nid_rsa\nid_rsa.pub\n1\n"
                              "  IdentityFile /root/.ssh/id_rsa\n"), err
