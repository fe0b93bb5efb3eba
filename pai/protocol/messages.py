"""The messages, as frozen dataclasses with explicit ``to_dict``/``from_dict`` (JSON-ready)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pai.domain.resources import Resources
from pai.domain.timing import GRACE_SECONDS
from pai.protocol.members import JobMembers
from pai.protocol.ssh import SshAccess

# How the protocol grows: a field is added with a default, which is what a peer that predates it means (an older
# agent or master leaves it out: ``from_dict`` reads it as the default), and every ``from_dict`` ignores the keys
# it does not know (an older peer reads a newer one's message as it always did). ``PROTOCOL_VERSION`` changes
# only when a message's meaning changes so that an older peer would act on it wrongly.
PROTOCOL_VERSION = 1


class ProtocolError(ValueError):
    """A message that does not follow this protocol version."""


def _epoch(d: dict[str, Any]) -> int:
    """A message's ``epoch`` (the sending launcher's term, the fencing token of ADR 0001): an integer >= 0;
    absent, as from a master that predates it: 0 (unfenced)."""
    epoch = d.get("epoch", 0)
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ProtocolError(f"epoch: {epoch!r} is not an integer >= 0")
    return epoch


def _check_version(d: dict[str, Any]) -> None:
    v = d.get("version")
    if v != PROTOCOL_VERSION:
        raise ProtocolError(f"agent protocol version {v!r} is not supported (master speaks {PROTOCOL_VERSION})")


class ContainerStatus(StrEnum):
    RUNNING = "running"
    EXITED = "exited"


@dataclass(frozen=True, slots=True)
class ContainerReport:
    attempt_id: str
    job_key: str
    role: str
    index: int
    status: ContainerStatus
    exit_code: int | None = None
    reason: str | None = None
    started_at: float | None = None
    finished_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attemptId": self.attempt_id,
            "jobKey": self.job_key,
            "role": self.role,
            "index": self.index,
            "status": self.status.value,
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ContainerReport:
        try:
            return cls(
                attempt_id=str(d["attemptId"]),
                job_key=str(d["jobKey"]),
                role=str(d["role"]),
                index=int(d["index"]),
                status=ContainerStatus(d["status"]),
                exit_code=None if d.get("exitCode") is None else int(d["exitCode"]),
                reason=d.get("reason"),
                started_at=d.get("startedAt"),
                finished_at=d.get("finishedAt"),
            )
        except (KeyError, ValueError, TypeError) as e:
            raise ProtocolError(f"bad container report: {e}") from e


@dataclass(frozen=True, slots=True)
class GpuHealth:
    index: int
    healthy: bool = True
    ecc_errors: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "healthy": self.healthy, "eccErrors": self.ecc_errors}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GpuHealth:
        return cls(int(d["index"]), bool(d.get("healthy", True)), int(d.get("eccErrors", 0)))


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    address: str
    resources: Resources
    gpu_type: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    log_port: int = 0  # the agent's log server listens on address:log_port
    runtime: str = "process"
    gpu_memory_mb: int = 0  # per GPU (NVML); 0 when unknown

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": self.address,
            "resources": self.resources.to_dict(),
            "gpuType": self.gpu_type,
            "labels": dict(self.labels),
            "logPort": self.log_port,
            "runtime": self.runtime,
            "gpuMemoryMB": self.gpu_memory_mb,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NodeInfo:
        try:
            return cls(
                name=str(d["name"]),
                address=str(d["address"]),
                resources=Resources.from_dict(d["resources"]),
                gpu_type=d.get("gpuType"),
                labels={str(k): str(v) for k, v in (d.get("labels") or {}).items()},
                log_port=int(d.get("logPort", 0)),
                runtime=str(d.get("runtime", "process")),
                gpu_memory_mb=int(d.get("gpuMemoryMB", 0)),
            )
        except (KeyError, ValueError, TypeError) as e:
            raise ProtocolError(f"bad node info: {e}") from e


def failed_gpus(gpus: tuple[GpuHealth, ...]) -> tuple[int, ...]:
    """The indices of the GPUs an agent reports unhealthy."""
    return tuple(g.index for g in gpus if not g.healthy)


@dataclass(frozen=True, slots=True)
class RegisterRequest:
    node: NodeInfo
    containers: tuple[ContainerReport, ...] = ()
    gpus: tuple[GpuHealth, ...] = ()
    problems: tuple[str, ...] = ()  # the node's health problems, in words (none: healthy)

    @property
    def node_name(self) -> str:
        return self.node.name

    @property
    def failed_gpus(self) -> tuple[int, ...]:
        return failed_gpus(self.gpus)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": PROTOCOL_VERSION,
            "node": self.node.to_dict(),
            "containers": [c.to_dict() for c in self.containers],
            "gpus": [g.to_dict() for g in self.gpus],
            "problems": list(self.problems),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RegisterRequest:
        _check_version(d)
        return cls(
            node=NodeInfo.from_dict(d.get("node") or {}),
            containers=tuple(ContainerReport.from_dict(c) for c in d.get("containers") or ()),
            gpus=tuple(GpuHealth.from_dict(g) for g in d.get("gpus") or ()),
            problems=tuple(str(p) for p in d.get("problems") or ()),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    node: str
    containers: tuple[ContainerReport, ...] = ()
    gpus: tuple[GpuHealth, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def node_name(self) -> str:
        return self.node

    @property
    def failed_gpus(self) -> tuple[int, ...]:
        return failed_gpus(self.gpus)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": PROTOCOL_VERSION,
            "node": self.node,
            "containers": [c.to_dict() for c in self.containers],
            "gpus": [g.to_dict() for g in self.gpus],
            "problems": list(self.problems),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeartbeatRequest:
        _check_version(d)
        try:
            return cls(
                node=str(d["node"]),
                containers=tuple(ContainerReport.from_dict(c) for c in d.get("containers") or ()),
                gpus=tuple(GpuHealth.from_dict(g) for g in d.get("gpus") or ()),
                problems=tuple(str(p) for p in d.get("problems") or ()),
            )
        except (KeyError, TypeError) as e:
            raise ProtocolError(f"bad heartbeat: {e}") from e


# What an agent sends the master over HTTP (the master handles them in order, several in one transaction).
AgentRequest = RegisterRequest | HeartbeatRequest


@dataclass(frozen=True, slots=True)
class VolumeMount:
    """A directory of the node (a storage) mounted in the task."""

    host_path: str
    mount_path: str
    read_only: bool = False
    name: str = ""  # the storage's, for messages

    def to_dict(self) -> dict[str, Any]:
        return {"hostPath": self.host_path, "mountPath": self.mount_path, "readOnly": self.read_only,
                "name": self.name}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VolumeMount:
        return cls(str(d["hostPath"]), str(d["mountPath"]), bool(d.get("readOnly", False)), str(d.get("name", "")))


@dataclass(frozen=True, slots=True)
class RegistryCredentials:
    """What the runtime pulls the image with (a v2 ``dockerimage`` prerequisite's ``auth``)."""

    username: str
    password: str = field(repr=False)
    registry: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"username": self.username, "password": self.password, "registry": self.registry}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RegistryCredentials:
        return cls(str(d.get("username", "")), str(d.get("password", "")), str(d.get("registry", "")))


@dataclass(frozen=True, slots=True)
class StartTask:
    attempt_id: str
    job_key: str
    role: str
    index: int
    image: str
    command: str
    env: dict[str, str]
    resources: Resources
    shm_mb: int = 64
    gpus: tuple[int, ...] = ()
    ports: dict[str, tuple[int, ...]] = field(default_factory=dict)
    code_dir: str = ""
    webhdfs: str = ""  # the WebHDFS address of an hdfs:// codeDir's namenode; "" for the default rule
    # A local codeDir's rule as it stands when the command is sent (pai.domain.localpaths): the cluster's
    # localPaths roots open to the job's user (none: no local codeDir is copied), and the master's own paths.
    local_roots: tuple[str, ...] = ()
    protected_paths: tuple[str, ...] = ()
    mounts: tuple[VolumeMount, ...] = ()
    registry_auth: RegistryCredentials | None = None
    # The job's v2 secrets (None: it has none), for the files under OpenPAI's /usr/local/pai/secrets; never logged.
    secrets: dict[str, Any] | None = field(default=None, repr=False)
    # SSH into the task through the agent's endpoint on its ``ssh`` port (pai.protocol.ssh); None: no endpoint (a
    # master that predates it).
    ssh: SshAccess | None = None
    # An elastic job's membership when the task starts (pai.protocol.members); None: the job is not elastic.
    members: JobMembers | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "start",
            "attemptId": self.attempt_id,
            "jobKey": self.job_key,
            "role": self.role,
            "index": self.index,
            "image": self.image,
            "command": self.command,
            "env": dict(self.env),
            "resources": self.resources.to_dict(),
            "shmMB": self.shm_mb,
            "gpus": list(self.gpus),
            "ports": {k: list(v) for k, v in self.ports.items()},
            "codeDir": self.code_dir,
            "webhdfs": self.webhdfs,
            "localRoots": list(self.local_roots),
            "protectedPaths": list(self.protected_paths),
            "mounts": [m.to_dict() for m in self.mounts],
            "registryAuth": None if self.registry_auth is None else self.registry_auth.to_dict(),
            "secrets": self.secrets,
            "ssh": None if self.ssh is None else self.ssh.to_dict(),
            "members": None if self.members is None else self.members.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StartTask:
        try:
            return cls(
                attempt_id=str(d["attemptId"]),
                job_key=str(d["jobKey"]),
                role=str(d["role"]),
                index=int(d["index"]),
                image=str(d.get("image", "")),
                command=str(d["command"]),
                env={str(k): str(v) for k, v in d["env"].items()},
                resources=Resources.from_dict(d["resources"]),
                shm_mb=int(d.get("shmMB", 64)),
                gpus=tuple(int(g) for g in d.get("gpus", ())),
                ports={str(k): tuple(int(p) for p in v) for k, v in (d.get("ports") or {}).items()},
                code_dir=str(d.get("codeDir", "")),
                webhdfs=str(d.get("webhdfs", "")),
                local_roots=tuple(str(r) for r in d.get("localRoots") or ()),
                protected_paths=tuple(str(p) for p in d.get("protectedPaths") or ()),
                mounts=tuple(VolumeMount.from_dict(m) for m in d.get("mounts") or ()),
                registry_auth=RegistryCredentials.from_dict(d["registryAuth"]) if d.get("registryAuth") else None,
                secrets=_mapping_or_none(d.get("secrets"), "secrets"),
                ssh=SshAccess.from_dict(d["ssh"]) if d.get("ssh") else None,
                members=JobMembers.from_dict(d["members"]) if d.get("members") else None,
            )
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            raise ProtocolError(f"bad start command: {e}") from e


def _mapping_or_none(value: Any, name: str) -> dict[str, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    raise TypeError(f"{name} must be an object or null")


@dataclass(frozen=True, slots=True)
class StopTask:
    attempt_id: str
    grace_seconds: float = GRACE_SECONDS
    exit_code: int = -400  # the PlatformExit code the attempt ends with (stopped, preempted, ...)
    reason: str = "stopped"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "stop",
            "attemptId": self.attempt_id,
            "graceSeconds": self.grace_seconds,
            "exitCode": self.exit_code,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StopTask:
        try:
            return cls(
                str(d["attemptId"]),
                float(d.get("graceSeconds", GRACE_SECONDS)),
                int(d.get("exitCode", -400)),
                str(d.get("reason", "stopped")),
            )
        except (KeyError, ValueError, TypeError) as e:
            raise ProtocolError(f"bad stop command: {e}") from e


Command = StartTask | StopTask


@dataclass(frozen=True, slots=True)
class MasterReply:
    commands: tuple[Command, ...] = ()
    heartbeat_seconds: float = 1.0
    # Fencing: an agent without a reply for ``node_timeout_seconds`` stops its tasks (SIGTERM, then SIGKILL
    # after ``fence_grace_seconds``): the master requeues them elsewhere only after that window.
    node_timeout_seconds: float = 30.0
    fence_grace_seconds: float = 5.0
    # The launcher's epoch: an agent refuses the reply's commands when it has seen a higher one (a deposed
    # leader's). 0: a launcher that holds no lease (unfenced), accepted while the agent has seen nothing higher.
    epoch: int = 0
    # The membership of each elastic job with a task on the node (pai.protocol.members); a reply from memory (a
    # quiet heartbeat's) carries none: nothing changed.
    members: tuple[JobMembers, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": PROTOCOL_VERSION,
            "commands": [c.to_dict() for c in self.commands],
            "heartbeatSeconds": self.heartbeat_seconds,
            "nodeTimeoutSeconds": self.node_timeout_seconds,
            "fenceGraceSeconds": self.fence_grace_seconds,
            "epoch": self.epoch,
            "members": [m.to_dict() for m in self.members],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MasterReply:
        _check_version(d)
        cmds: list[Command] = []
        for c in d.get("commands") or ():
            kind = c.get("type")
            if kind == "start":
                cmds.append(StartTask.from_dict(c))
            elif kind == "stop":
                cmds.append(StopTask.from_dict(c))
            else:
                raise ProtocolError(f"unknown command type {kind!r}")
        try:
            members = tuple(JobMembers.from_dict(m) for m in d.get("members") or ())
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            raise ProtocolError(f"bad members: {e}") from e
        return cls(tuple(cmds), float(d.get("heartbeatSeconds", 1.0)), float(d.get("nodeTimeoutSeconds", 30.0)),
                   float(d.get("fenceGraceSeconds", 5.0)), _epoch(d), members)


@dataclass(frozen=True, slots=True)
class Poke:
    """Pushed over the agent channel (``/api/internal/agents/{node}/channel``): the master has something for
    this node (a start, a stop). The agent answers with a heartbeat at once, whose reply carries the commands.
    A poke carries no command itself, so a lost one loses nothing: the next heartbeat brings the same. It carries
    the launcher's epoch as a reply does: an agent ignores a poke of a deposed leader."""

    reason: str = "changed"
    epoch: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"version": PROTOCOL_VERSION, "type": "poke", "reason": self.reason, "epoch": self.epoch}

    @classmethod
    def from_dict(cls, d: Any) -> Poke:
        if not isinstance(d, dict):
            raise ProtocolError("a channel message is a JSON object")
        _check_version(d)
        if d.get("type") != "poke":
            raise ProtocolError(f"type: unknown channel message {d.get('type')!r}")
        return cls(str(d.get("reason", "changed")), _epoch(d))
