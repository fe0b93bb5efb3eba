"""What a start command's ``ssh`` leaves in the attempt's directory: the agent's endpoint file, and OpenPAI's ``~/.ssh``
layout for a task whose role asks for ``jobssh``.

- ``<attempt>/ssh-endpoint.json`` (0600, the agent's own): the task's ``ssh`` port and the keys its SSH endpoint
  lets in (``pai.nodeagent.sshd`` serves it while the attempt runs, also after an agent restart);
- ``<attempt>/ssh/`` (0700), with ``jobssh``: ``id_rsa`` (the job's private key), ``id_rsa.pub``,
  ``authorized_keys`` and ``config``, where openpai-runtime's ssh plugin writes one ``Host <role>-<index>`` entry
  for every task of the job (``HostName``, ``Port``, ``User root``, ``StrictHostKeyChecking no``,
  ``UserKnownHostsFile /dev/null``, ``IdentityFile``). The docker runtime mounts it at ``/root/.ssh``; the process
  runtime leaves it where it is. Both set ``PAI_SSH_DIR`` to where the task finds it.

Both are removed when the attempt ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pai.protocol import SshAccess, StartTask

ENV = "PAI_SSH_DIR"
CONTAINER_DIR = "/root/.ssh"
ENDPOINT_FILE = "ssh-endpoint.json"
SSH_LABEL = "ssh"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An attempt's SSH endpoint: the port it listens on, the public key lines it lets in."""

    port: int
    authorized_keys: tuple[str, ...]


def directory(workdir: Path) -> Path:
    return workdir / "ssh"


def prepare(cmd: StartTask, workdir: Path, seen_at: str | None = None) -> Path | None:
    """Write the endpoint file and, with ``jobssh``, the layout (again, if an earlier start left some); the layout's
    directory, None without one. ``seen_at``: where the task sees the directory (None: where it is)."""
    remove(workdir)
    ports = cmd.ports.get(SSH_LABEL, ())
    if cmd.ssh is None or not ports:
        return None
    _write(workdir / ENDPOINT_FILE, json.dumps({"port": ports[0], "authorizedKeys": list(cmd.ssh.authorized_keys)}))
    if not cmd.ssh.job_private_key:
        return None
    target = directory(workdir)
    target.mkdir(mode=0o700, parents=True)
    _write_layout(target, cmd.ssh, seen_at or str(target))
    return target


def _write_layout(target: Path, access: SshAccess, seen_at: str) -> None:
    _write(target / "id_rsa", access.job_private_key.rstrip("\n") + "\n")
    _write(target / "id_rsa.pub", access.job_public_key + "\n", 0o644)
    _write(target / "authorized_keys", "".join(f"{k}\n" for k in access.authorized_keys))
    _write(target / "config", "".join(
        f"Host {h.name}\n  HostName {h.address}\n  Port {h.port}\n  User root\n  StrictHostKeyChecking no\n"
        f"  UserKnownHostsFile /dev/null\n  IdentityFile {seen_at}/id_rsa\n" for h in access.hosts))


def endpoint(workdir: Path) -> Endpoint | None:
    """The attempt's endpoint, as its start wrote it; None when it has none (or the file is unreadable)."""
    try:
        d = json.loads((workdir / ENDPOINT_FILE).read_text())
        return Endpoint(int(d["port"]), tuple(str(k) for k in d.get("authorizedKeys") or ()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def remove(workdir: Path) -> None:
    """Remove an attempt's endpoint file and layout, if any (a workdir that is not an absolute path is left alone)."""
    if workdir.is_absolute():
        shutil.rmtree(directory(workdir), ignore_errors=True)
        with contextlib.suppress(OSError):
            (workdir / ENDPOINT_FILE).unlink(missing_ok=True)


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
