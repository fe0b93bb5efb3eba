"""JobSpec: the one normalized form of a v1 JSON or v2 YAML job."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pai.domain.resources import Resources
from pai.domain.storage import StorageMount

# OpenPAI's priority classes (extras.hivedScheduler.jobPriorityClass); admins may add more.
PRIORITY_CLASSES: dict[str, int] = {"prod": 100, "test": 10, "oppo": -1}
DEFAULT_PRIORITY_CLASS = "test"
# Every task gets these port labels besides its own.
RESERVED_PORT_LABELS = ("http", "ssh")
# An elastic role's tasks get this one too: torchrun's c10d rendezvous store, hosted by the role's index 0.
RDZV_PORT_LABEL = "rdzv"
# OpenPAI v0.14's v1 ``retryCount`` below zero (FrameworkLauncher's maxRetryCount): retry every failure that is
# retried at all (unknown exits; transient ones are requeued anyway), without limit ...
RETRY_UNLIMITED = -1
# ... or retry after every exit, success and permanent failures included: a service that runs until stopped.
RETRY_ALWAYS = -2
# How a secret's value is shown in every answer, and kept in the store's clear columns.
SECRET_MASK = "******"


@dataclass(frozen=True, slots=True)
class SpecWarning:
    """A field the job asks for that this cluster accepts but does not honour (``field``: its path)."""

    field: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


@dataclass(frozen=True, slots=True)
class PortSpec:
    label: str
    count: int = 1
    begin_at: int = 0  # 0: any free port of the node's range


@dataclass(frozen=True, slots=True)
class RegistryAuth:
    """Credentials for pulling a role's image (a v2 ``dockerimage`` prerequisite's ``auth``, secrets resolved)."""

    username: str
    password: str = field(repr=False)
    registry: str = ""  # registryuri: "" for the registry the image name implies


@dataclass(frozen=True, slots=True)
class SshPlugin:
    """OpenPAI's ``ssh`` runtime plugin as a role asks for it: ``jobssh`` (the job's key pair and OpenPAI's ``~/.ssh``
    layout in its tasks, so that they reach each other as ``<role>-<index>``) and ``userssh`` (public keys of the
    ``custom`` type, let into its tasks)."""

    job_ssh: bool = False
    user_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ElasticRange:
    """How far an elastic role may stretch (``extras.elastic.<role>``, issue 31): it is admitted at
    ``min_instances`` (a gang at its minimum) and may grow to ``max_instances``; ``instances`` is the size it asks
    for first. ``min_instances == max_instances``: accepted, and the role never resizes."""

    min_instances: int
    max_instances: int

    @property
    def resizable(self) -> bool:
        return self.min_instances < self.max_instances


@dataclass(frozen=True, slots=True)
class TaskRoleSpec:
    name: str
    instances: int
    command: str
    resources: Resources
    image: str = ""
    shm_mb: int = 64
    ports: tuple[PortSpec, ...] = ()
    min_failed: int | None = 1  # None: failures never fail the job
    min_succeeded: int | None = None  # None: every instance must succeed
    task_retry_count: int = 0
    gpu_type: str | None = None
    image_auth: RegistryAuth | None = None
    # labels a task's node must carry (label -> value): the role's extras selector merged over the job's
    node_selector: dict[str, str] = field(default_factory=dict)
    ssh: SshPlugin | None = None  # the role's ssh runtime plugin; None: it has none
    elastic: ElasticRange | None = None  # extras.elastic.<role>; None: the role keeps ``instances``

    @property
    def total(self) -> Resources:
        return self.resources * self.instances

    def all_ports(self) -> tuple[PortSpec, ...]:
        """The role's ports with ``http`` and ``ssh`` added when the spec does not name them, and ``rdzv`` for a role
        that may resize."""
        own = {p.label for p in self.ports}
        labels = RESERVED_PORT_LABELS + ((RDZV_PORT_LABEL,) if self.elastic is not None and self.elastic.resizable
                                         else ())
        extra = tuple(PortSpec(label) for label in labels if label not in own)
        return extra + self.ports


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    task_roles: tuple[TaskRoleSpec, ...]
    protocol_version: int = 2
    virtual_cluster: str = "default"
    retry_count: int = 0  # >= 0, or RETRY_UNLIMITED / RETRY_ALWAYS
    image: str = ""
    code_dir: str = ""
    data_dir: str = ""
    output_dir: str = ""
    job_envs: dict[str, str] = field(default_factory=dict)
    gpu_type: str | None = None
    priority_class: str = DEFAULT_PRIORITY_CLASS
    priority: int = PRIORITY_CLASSES[DEFAULT_PRIORITY_CLASS]
    gang: bool = True
    preemptible: bool = True  # extras.preemptible: false: never a victim of preemption (a right, see preemptible.py)
    node_selector: dict[str, str] = field(default_factory=dict)  # extras.nodeSelector (every role's merges over it)
    whole_nodes: bool = False  # extras.wholeNodes: every task takes a whole node, nothing else beside it
    # extras.expectedDurationSeconds: how long the job expects to run; waiting reasons say when it should end
    expected_seconds: float | None = None
    storages: tuple[StorageMount, ...] = ()
    # v2 ``secrets`` as submitted (None: the job has none), written to files in every task (OpenPAI's
    # /usr/local/pai/secrets/secrets.yaml); never shown.
    secrets: dict[str, Any] | None = field(default=None, repr=False)
    # A spec read from the store: its secrets, and the commands and image auth rendered from them, are masked
    # (SECRET_MASK) and this opaque token holds them, encrypted (pai.store.sealing). None: they are in clear here.
    sealed: str | None = field(default=None, repr=False)
    # The job's SSH key pair (OpenSSH lines), made at submission for a job whose roles use the ssh plugin ("": none).
    # The private key is sealed with the secrets: a spec read from the store has "" here until a task starts.
    ssh_public_key: str = ""
    ssh_private_key: str = field(default="", repr=False)
    # A trial's job (issue 29): its trial's token, made when the searcher asked for it, sealed like the SSH key; the
    # trial's tasks get it as PAI_TRIAL_TOKEN ("": not a trial).
    trial_token: str = field(default="", repr=False)

    @property
    def uses_ssh_plugin(self) -> bool:
        return any(r.ssh is not None for r in self.task_roles)

    def role(self, name: str) -> TaskRoleSpec:
        for r in self.task_roles:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def total(self) -> Resources:
        acc = Resources()
        for r in self.task_roles:
            acc = acc + r.total
        return acc

    @property
    def is_elastic(self) -> bool:
        """Whether any role may resize (a range wider than one size)."""
        return any(r.elastic is not None and r.elastic.resizable for r in self.task_roles)

    @property
    def instance_count(self) -> int:
        return sum(r.instances for r in self.task_roles)
