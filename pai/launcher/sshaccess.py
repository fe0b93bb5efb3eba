"""SSH into a job's tasks: the job's key pair, and what a task's start command says of SSH (``SshAccess``).

Every task gets an SSH endpoint from its node's agent (no sshd in the image), which lets in:

- the owner's own public keys (OpenPAI keeps them in the user's extension, ``sshKeys: [{title, value, time}]``),
  as they stand when the task starts;
- the job's public key, for a job whose roles use OpenPAI's ``ssh`` runtime plugin (its key pair is made at
  submission, the private key sealed with the job's secrets; its owner and admins download it);
- the role's ``userssh`` keys (type ``custom``).

A role whose plugin asks for ``jobssh`` also gets the job's key pair and a ``Host <role>-<index>`` entry for every
placed task of the job (OpenPAI's ``~/.ssh`` layout), so that its tasks reach each other by name.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pai.domain.errors import NoJobSshInfoError
from pai.domain.job import Job, Task
from pai.domain.jobspec import JobSpec
from pai.domain.sshkeys import valid_keys
from pai.protocol import SshAccess, SshHost
from pai.store import jobs as store_jobs
from pai.store import sealing
from pai.store.db import Database

SSH_LABEL = "ssh"


def new_key_pair(comment: str) -> tuple[str, str]:
    """A fresh Ed25519 key pair: (private key in OpenSSH's format, public key line with ``comment``)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode("ascii")
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, f"{public.decode('ascii')} {comment}"


def with_key_pair(spec: JobSpec, job_key: str) -> JobSpec:
    """``spec`` with a key pair of its own when its roles use the ssh plugin (and it has none yet)."""
    if not spec.uses_ssh_plugin or spec.ssh_public_key:
        return spec
    private, public = new_key_pair(f"pai-job-ssh:{job_key}")
    return replace(spec, ssh_private_key=private, ssh_public_key=public)


def extension_keys(extension: dict[str, Any]) -> tuple[str, ...]:
    """The public keys of a user's extension (``sshKeys: [{title, value, time}]``); what is not a key is skipped."""
    items = extension.get("sshKeys")
    if not isinstance(items, list):
        return ()
    return valid_keys([str(item["value"]) for item in items if isinstance(item, dict) and "value" in item])


def peers(job: Job) -> tuple[SshHost, ...]:
    """Every placed task of the job with an ``ssh`` port, as its peers' ``~/.ssh/config`` names it."""
    order = {r.name: i for i, r in enumerate(job.spec.task_roles)}
    tasks = sorted(job.tasks, key=lambda t: (order.get(t.role, len(order)), t.index))
    return tuple(SshHost(f"{t.role}-{t.index}", t.address, t.ports[SSH_LABEL][0]) for t in tasks
                 if t.address is not None and t.ports.get(SSH_LABEL))


def access_for(job: Job, task: Task, spec: JobSpec, owner_keys: tuple[str, ...]) -> SshAccess:
    """What the start command of ``task`` says of SSH; ``spec``: the job's, unsealed (its private key in clear)."""
    plugin = spec.role(task.role).ssh
    keys = [*owner_keys, spec.ssh_public_key, *(plugin.user_keys if plugin is not None else ())]
    if plugin is None or not plugin.job_ssh or not spec.ssh_private_key:
        return SshAccess(valid_keys(keys))
    return SshAccess(valid_keys(keys), spec.ssh_private_key, spec.ssh_public_key, peers(job))


def plugin_job(db: Database, key: str) -> Job:
    """The job ``key`` (NoJobError), which must use the ssh plugin (NoJobSshInfoError: it has no key pair, and its
    tasks let in their owner's own keys only; ``pai ssh`` reaches them)."""
    with db.session() as s:
        job = store_jobs.get_job(s, key)
    if not job.spec.uses_ssh_plugin:
        raise NoJobSshInfoError(f"SSH info of job {key} is not found: it does not use the ssh runtime plugin (extras."
                                f"com.microsoft.pai.runtimeplugin: [{{plugin: ssh, parameters: {{jobssh: true}}}}]), "
                                "so it has no key pair; its owner reaches its tasks with their own key: "
                                f"`pai ssh-key add`, then `pai ssh {key}`")
    return job


def private_key(db: Database, key: str) -> str:
    """The job's private key, unsealed (NoJobError, NoJobSshInfoError)."""
    job = plugin_job(db, key)
    with db.session() as s:
        return sealing.unsealed(s, job.spec).ssh_private_key
