"""What a start command says of SSH into its task: the keys the node's SSH endpoint lets in, and OpenPAI's ``~/.ssh``
layout for the task (the ``ssh`` runtime plugin's ``jobssh``).

Every task is served an SSH endpoint by its node's agent, on the task's ``ssh`` port, trusting ``authorized_keys``
(the owner's keys from their user extension, the job's public key, the plugin's ``userssh`` value). A task of a role
whose plugin asks for ``jobssh`` also gets the job's key pair and a ``Host <role>-<index>`` entry for every task of
the job in its ``~/.ssh``, so that its tasks reach each other by name, as OpenPAI's runtime sets them up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class SshHost:
    """A task of the job as the ``~/.ssh/config`` of its peers names it: ``Host <role>-<index>``."""

    name: str
    address: str
    port: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "port": self.port}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SshHost:
        return cls(str(d["name"]), str(d["address"]), int(d["port"]))


@dataclass(frozen=True, slots=True)
class SshAccess:
    """``authorized_keys``: OpenSSH public key lines the endpoint accepts (any user name; the session runs as the
    task's user). ``job_private_key``: the job's key in OpenSSH format, "" when the task's role does not ask for
    ``jobssh`` (then no ``~/.ssh`` layout is written); ``hosts``: the job's placed tasks, for its config."""

    authorized_keys: tuple[str, ...] = ()
    job_private_key: str = field(default="", repr=False)
    job_public_key: str = ""
    hosts: tuple[SshHost, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "authorizedKeys": list(self.authorized_keys),
            "jobPrivateKey": self.job_private_key,
            "jobPublicKey": self.job_public_key,
            "hosts": [h.to_dict() for h in self.hosts],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SshAccess:
        return cls(
            authorized_keys=tuple(str(k) for k in d.get("authorizedKeys") or ()),
            job_private_key=str(d.get("jobPrivateKey") or ""),
            job_public_key=str(d.get("jobPublicKey") or ""),
            hosts=tuple(SshHost.from_dict(h) for h in d.get("hosts") or ()),
        )
