"""A real SSH client (Debian's ``/usr/bin/ssh``, ``scp``, ``sftp``) against the agent's SSH endpoints: keys made
in a temporary directory, the node's host key accepted into a known_hosts file of the test's own."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from pai.nodeagent.logfmt import bind
from pai.nodeagent.paths import AgentPaths
from pai.nodeagent.runtime import Runtime
from pai.nodeagent.sshd import SshEndpoints
from pai.protocol import SshAccess, SshHost
from tests.eventually import eventually

TIMEOUT = 30.0
ADDRESS = "127.0.0.1"


def require_client() -> None:
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        if os.environ.get("CI") == "true":
            raise AssertionError("the ssh client (openssh-client) is a prerequisite of these tests")
        pytest.skip("no ssh client (apt install openssh-client)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((ADDRESS, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Client:
    """A user's side: a key pair and a known_hosts file."""

    key: Path
    known_hosts: Path

    @property
    def public(self) -> str:
        return self.key.with_suffix(".pub").read_text().strip()

    def options(self) -> list[str]:
        return ["-F", "/dev/null", "-i", str(self.key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"]

    def ssh(self, port: int, *command: str, flags: tuple[str, ...] = ()) -> list[str]:
        return ["ssh", *self.options(), "-p", str(port), *flags, f"someone@{ADDRESS}", *command]


def client(directory: Path, name: str = "id") -> Client:
    directory.mkdir(parents=True, exist_ok=True)
    key = directory / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return Client(key, directory / "known_hosts")


async def run(argv: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    """Run a client command: its exit code, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(TIMEOUT):
        out, err = await proc.communicate(stdin)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def access(*keys: str, private: str = "", public: str = "", hosts: tuple[SshHost, ...] = ()) -> SshAccess:
    return SshAccess(tuple(keys), private, public, hosts)


async def served(endpoints: SshEndpoints, runtime: Runtime, attempt_id: str) -> int:
    """The attempt's endpoint port, once it listens (the endpoints follow the runtime's reports)."""
    def probe() -> int | None:
        endpoints.sync(runtime.reports())
        return endpoints.port_of(attempt_id)
    return await eventually(probe, what=f"the SSH endpoint of {attempt_id}")


def endpoints_for(paths: AgentPaths, runtime: Runtime) -> SshEndpoints:
    return SshEndpoints(runtime, paths, ADDRESS, bind(logging.getLogger("pai.nodeagent.ssh-test")))
