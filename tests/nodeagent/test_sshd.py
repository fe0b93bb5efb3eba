"""The agent's SSH endpoint of a process-runtime task, with the real OpenSSH client: commands and their exit codes in
the task's environment, a terminal that resizes, files both ways (scp and sftp), a local port forward to a port the
task listens on, keys that are not the task's refused, nothing left behind by a dropped connection, and an endpoint
that goes with its attempt."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import signal
import stat
import struct
import termios
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pai.nodeagent.paths import AgentPaths
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.nodeagent.sshd import SshEndpoints
from pai.protocol import ContainerStatus, SshHost, StartTask
from tests.eventually import eventually
from tests.nodeagent.builders import start_task, wait_status
from tests.nodeagent.conftest import Groups
from tests.nodeagent.execkit import processes_with
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


@dataclass
class Node:
    """A process runtime, its SSH endpoints, and a user whose key the tasks let in."""

    paths: AgentPaths
    runtime: ProcessRuntime
    endpoints: SshEndpoints
    user: Client
    groups: Groups

    async def task(self, attempt_id: str, command: str = "sleep 3600", port: int = 0,
                   **over: object) -> tuple[StartTask, int]:
        """A running task whose endpoint trusts the user; its start command and its endpoint's port."""
        port = port or free_port()
        env = {"PAI_JOB_NAME": "alice~job", "GREETING": f"hello from {attempt_id}"}
        cmd = replace(start_task(attempt_id, command, env=env), ports={"ssh": (port,)},
                      **{"ssh": access(self.user.public), **over})
        await self.runtime.start(cmd, self.paths.attempt(attempt_id))
        self.groups.add(self.runtime.process_group(attempt_id))
        assert await served(self.endpoints, self.runtime, attempt_id) == port
        return cmd, port


@pytest.fixture
async def node(tmp_path: Path, runtime: ProcessRuntime, groups: Groups) -> AsyncIterator[Node]:
    require_client()
    paths = AgentPaths(tmp_path / "agent")
    endpoints = endpoints_for(paths, runtime)
    await endpoints.start()
    yield Node(paths, runtime, endpoints, client(tmp_path / "user"), groups)
    await endpoints.close()


async def test_a_command_runs_in_the_task_with_its_environment_and_exit_code(node: Node) -> None:
    _, port = await node.task("a1")
    code, out, err = await run(node.user.ssh(port, "echo \"$GREETING from $PAI_JOB_NAME\"; pwd; echo oops >&2; exit 7"))
    assert (code, out, err) == (7, f"hello from a1 from alice~job\n{node.paths.attempt('a1')}\n", "oops\n")


async def test_stdin_reaches_the_command(node: Node) -> None:
    _, port = await node.task("a1")
    code, out, _ = await run(node.user.ssh(port, "tr a-z A-Z"), stdin=b"shout\n")
    assert (code, out) == (0, "SHOUT\n")


async def test_a_key_the_task_does_not_trust_is_refused(node: Node, tmp_path: Path) -> None:
    _, port = await node.task("a1")
    stranger = client(tmp_path / "stranger")
    code, out, err = await run(stranger.ssh(port, "echo in"))
    assert (code, out) == (255, "") and "Permission denied (publickey)" in err


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


async def _read_until(fd: int, marker: bytes, seen: bytearray) -> None:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(20):
        while marker not in seen:
            seen += await loop.run_in_executor(None, os.read, fd, 4096)


async def test_a_terminal_has_the_clients_size_and_follows_its_changes(node: Node) -> None:
    _, port = await node.task("a1")
    master, slave = pty.openpty()
    _set_size(slave, 30, 100)
    proc = await asyncio.create_subprocess_exec(*node.user.ssh(port, flags=("-tt",)), stdin=slave, stdout=slave,
                                                stderr=slave, start_new_session=True)
    os.close(slave)
    seen = bytearray()
    try:
        os.write(master, b"stty size; echo \"term=$TERM\"\n")
        await _read_until(master, b"30 100", seen)
        await _read_until(master, b"term=xterm", seen)  # the client's TERM
        _set_size(master, 40, 120)
        proc.send_signal(signal.SIGWINCH)
        os.write(master, b"stty size\n")
        await _read_until(master, b"40 120", seen)
        os.write(master, b"exit 3\n")
        async with asyncio.timeout(20):
            assert await proc.wait() == 3
    finally:
        if proc.returncode is None:
            proc.kill()
        os.close(master)


async def test_files_go_both_ways_with_scp_and_sftp_in_the_tasks_directory(node: Node, tmp_path: Path) -> None:
    _, port = await node.task("a1")
    workdir = node.paths.attempt("a1")
    local = tmp_path / "local.txt"
    local.write_bytes(b"x" * 300_000 + b"end\n")
    opts = node.user.options()
    code, _, err = await run(["scp", *opts, "-P", str(port), str(local), f"someone@{ADDRESS}:uploaded.txt"])
    assert code == 0, err
    assert (workdir / "uploaded.txt").read_bytes() == local.read_bytes()  # relative: the task's directory
    (workdir / "made-by-task.txt").write_text("from the task\n")
    batch = tmp_path / "batch"
    batch.write_text(f"get made-by-task.txt {tmp_path / 'fetched.txt'}\nmkdir sub\nput {local} sub/again.txt\n"
                     f"ls sub\n")
    code, out, err = await run(["sftp", *opts, "-P", str(port), "-b", str(batch), f"someone@{ADDRESS}"])
    assert code == 0, err
    assert (tmp_path / "fetched.txt").read_text() == "from the task\n"
    assert (workdir / "sub" / "again.txt").read_bytes() == local.read_bytes()
    assert "again.txt" in out


async def test_a_local_forward_reaches_a_port_the_task_listens_on(node: Node) -> None:
    task_port, local_port = free_port(), free_port()
    echo = (f"python3 -c 'import socket\ns = socket.create_server((\"127.0.0.1\", {task_port}))\n"
            "while True:\n    c, _ = s.accept()\n    c.sendall(b\"task says \" + c.recv(100))\n    c.close()'")
    _, port = await node.task("a1", echo)
    proc = await asyncio.create_subprocess_exec(
        *node.user.ssh(port, flags=("-N", "-o", "ExitOnForwardFailure=yes",
                                    "-L", f"{local_port}:127.0.0.1:{task_port}")),
        stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)

    async def exchange() -> bytes | None:
        """The answer through the forward; None while the client or the task does not listen yet."""
        try:
            reader, writer = await asyncio.open_connection(ADDRESS, local_port)
            writer.write(b"ping")
            answer = await reader.read(100)
            writer.close()
        except OSError:
            return None
        return answer or None

    try:
        assert await eventually(exchange, timeout=20, what="an answer through the forward") == b"task says ping"
    finally:
        proc.kill()
        await proc.wait()


async def test_a_forward_to_another_host_is_refused(node: Node) -> None:
    """127.0.0.2 is not the node's address (127.0.0.1 here): a listener there is out of the task's reach."""
    _, port = await node.task("a1")
    elsewhere = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.2", 0)
    try:
        target = elsewhere.sockets[0].getsockname()
        code, _, err = await run(node.user.ssh(port, flags=("-W", f"{target[0]}:{target[1]}")))
        assert code == 255 and "forwarding failed" in err
        code, _, err = await run(node.user.ssh(port, flags=("-W", f"localhost:{port}")))  # the task's own: fine
        assert code == 0, err
    finally:
        elsewhere.close()


async def test_a_dropped_connection_leaves_no_process_of_its_session(node: Node) -> None:
    _, port = await node.task("a1")
    proc = await asyncio.create_subprocess_exec(*node.user.ssh(port, "exec sleep 4321"),
                                                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL)
    await eventually(lambda: processes_with("sleep 4321"), what="the session's process")
    proc.kill()
    await proc.wait()
    await eventually(lambda: not processes_with("sleep 4321"), what="no process of the dropped session")


async def test_the_endpoint_goes_with_its_attempt(node: Node) -> None:
    _, port = await node.task("a1", "sleep 3600")
    await node.runtime.stop("a1", 5.0)
    await wait_status(node.runtime, "a1", ContainerStatus.EXITED)

    async def refused() -> bool:
        node.endpoints.sync(node.runtime.reports())
        try:
            _, writer = await asyncio.open_connection(ADDRESS, port)
        except ConnectionRefusedError:
            return True
        except ConnectionResetError:  # closing
            return False
        writer.close()
        return False

    await eventually(refused, what="the endpoint closed")
    assert node.endpoints.port_of("a1") is None
    assert not (node.paths.attempt("a1") / "ssh-endpoint.json").exists()


async def test_jobssh_tasks_have_openpais_ssh_layout_and_reach_each_other_with_the_jobs_key(
        node: Node, tmp_path: Path) -> None:
    job = client(tmp_path / "job", "id_job")
    ports = free_port(), free_port()
    hosts = tuple(SshHost(f"worker-{i}", ADDRESS, p) for i, p in enumerate(ports))
    for i, port in enumerate(ports):
        ssh = access(node.user.public, job.public, private=job.key.read_text(), public=job.public, hosts=hosts)
        await node.task(f"w{i}", port=port, ssh=ssh, role="worker", index=i)
    layout = node.paths.attempt("w0") / "ssh"
    assert stat.S_IMODE(layout.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in layout.iterdir()} == {
        "id_rsa": 0o600, "id_rsa.pub": 0o644, "authorized_keys": 0o600, "config": 0o600}
    assert (layout / "id_rsa").read_text() == job.key.read_text()
    assert (layout / "authorized_keys").read_text() == f"{node.user.public}\n{job.public}\n"
    assert (layout / "config").read_text().startswith(
        f"Host worker-0\n  HostName {ADDRESS}\n  Port {ports[0]}\n  User root\n  StrictHostKeyChecking no\n"
        f"  UserKnownHostsFile /dev/null\n  IdentityFile {layout}/id_rsa\nHost worker-1\n")
    hop = ('echo "$PAI_SSH_DIR"; ssh -F "$PAI_SSH_DIR/config" -o BatchMode=yes -o LogLevel=ERROR worker-1 '
           "'echo $GREETING'")
    code, out, err = await run(node.user.ssh(ports[0], hop))
    assert (code, out) == (0, f"{layout}\nhello from w1\n"), err
