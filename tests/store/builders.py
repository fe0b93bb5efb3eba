"""Small builders of domain values for store tests."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from pai.domain.job import Job, initial_tasks
from pai.domain.jobspec import ElasticRange, JobSpec, PortSpec, RegistryAuth, SshPlugin, TaskRoleSpec
from pai.domain.node import Node
from pai.domain.resources import Resources
from pai.domain.states import JobState
from pai.domain.storage import StorageMount
from pai.store.records import User


def role(name: str = "worker", instances: int = 1, **changes: Any) -> TaskRoleSpec:
    return replace(TaskRoleSpec(name, instances, "python train.py", Resources(1, 4, 8192)), **changes)


def spec(name: str = "job", *roles: TaskRoleSpec, **changes: Any) -> JobSpec:
    return replace(JobSpec(name=name, task_roles=roles or (role(),)), **changes)


def job(
    name: str = "job",
    user: str = "alice",
    *,
    submitted_at: float = 1000.0,
    state: JobState = JobState.WAITING,
    roles: tuple[TaskRoleSpec, ...] = (),
    **spec_changes: Any,
) -> Job:
    """A job in ``state`` (set directly: these tests store states, they do not drive transitions)."""
    s = spec(name, *roles, **spec_changes)
    return Job(id=str(uuid.uuid4()), user=user, spec=s, state=state, submitted_at=submitted_at, tasks=initial_tasks(s))


def full_spec() -> JobSpec:
    """A spec where every field differs from its default, so a codec that drops one fails the round trip."""
    ps = role(
        "ps",
        2,
        image="ps:1",
        shm_mb=512,
        ports=(PortSpec("grpc", 2, 30000), PortSpec("tb")),
        min_failed=None,
        min_succeeded=1,
        task_retry_count=3,
        gpu_type="V100",
        resources=Resources(0, 2, 4096),
        image_auth=RegistryAuth("bot", "pw", "reg.example:5000"),
        node_selector={"zone": "b", "ssd": "yes"},
        ssh=SshPlugin(job_ssh=True, user_keys=("ssh-ed25519 AAAA user",)),
        elastic=ElasticRange(1, 6),
    )
    return JobSpec(
        name="full-job_1.0",
        task_roles=(role("worker", 4, command="torchrun x.py"), ps),
        protocol_version=1,
        virtual_cluster="research",
        retry_count=5,
        image="base:2",
        code_dir="hdfs://nn:9000/code",
        data_dir="file:///data",
        output_dir="/out",
        job_envs={"B": "2", "A": "1", "EMPTY": ""},
        gpu_type="A100",
        priority_class="prod",
        priority=100,
        gang=False,
        preemptible=False,
        node_selector={"zone": "a", "ssd": "yes"},
        whole_nodes=True,
        expected_seconds=7200.0,
        storages=(StorageMount("data", "/data", "extras.storages[0]", "/nfs/data", True),
                  StorageMount("home", "/mnt/home", "extras.storages[1]", "/nfs/home")),
        secrets={"token": "t0k", "nested": {"list": [1, True, None]}},
        ssh_public_key="ssh-ed25519 AAAA job",
        ssh_private_key="-----BEGIN OPENSSH PRIVATE KEY-----\n...",
        trial_token="trial-token-of-the-full-spec",
    )


def node(name: str = "n1", **changes: Any) -> Node:
    return replace(Node(name=name, address="10.0.0.1", total=Resources(8, 64, 256_000)), **changes)


def plain(name: str, *vcs: str) -> User:
    """A user as the store builds one: in ``default`` (which grants the default VC) and the groups of ``vcs``."""
    return User(name, False, ("default", *vcs), frozenset({"default", *vcs}))


def admin(name: str) -> User:
    """An admin as ``create_user(..., admin=True)`` makes one: ``default`` and ``admingroup``."""
    return User(name, True, ("default", "admingroup"), frozenset({"default"}))
