"""Small builders for the agent's commands, and waits that poll instead of sleeping blindly."""

from __future__ import annotations

from typing import Any, TypeVar

from pai.domain.resources import Resources
from pai.nodeagent.runtime import Runtime
from pai.protocol import ContainerReport, ContainerStatus, PlatformExit, StartTask, StopTask
from pai.protocol.members import JobMembers
from tests.eventually import eventually

T = TypeVar("T")


def start_task(
    attempt_id: str = "a1",
    command: str = "true",
    *,
    env: dict[str, str] | None = None,
    code_dir: str = "",
    local_roots: tuple[str, ...] = (),
    protected_paths: tuple[str, ...] = (),
    gpus: tuple[int, ...] = (),
    job_key: str = "alice~job",
    role: str = "worker",
    index: int = 0,
    secrets: dict[str, Any] | None = None,
    members: JobMembers | None = None,
) -> StartTask:
    return StartTask(
        attempt_id=attempt_id,
        job_key=job_key,
        role=role,
        index=index,
        image="",
        command=command,
        env=env or {},
        resources=Resources(0, 1, 128),
        gpus=gpus,
        code_dir=code_dir,
        local_roots=local_roots,
        protected_paths=protected_paths,
        secrets=secrets,
        members=members,
    )


def stop_task(
    attempt_id: str = "a1",
    grace: float = 5.0,
    exit_code: int = PlatformExit.STOPPED,
    reason: str = "stopped by the user",
) -> StopTask:
    return StopTask(attempt_id, grace, int(exit_code), reason)


def report_of(reports: list[ContainerReport], attempt_id: str) -> ContainerReport | None:
    return next((r for r in reports if r.attempt_id == attempt_id), None)


async def wait_status(runtime: Runtime, attempt_id: str, status: ContainerStatus) -> ContainerReport:
    def probe() -> ContainerReport | None:
        r = report_of(runtime.reports(), attempt_id)
        return r if r is not None and r.status is status else None

    return await eventually(probe, what=f"{attempt_id} {status.value}")
