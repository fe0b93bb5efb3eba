"""The job detail of an elastic job (pure, pai.rest_server.job_views): each elastic role's range and current size
(its members not leaving after a shrink), its members' task statuses, its resizes among its events, and its latest
attempt's totals at that size."""

from __future__ import annotations

from dataclasses import replace

from pai.domain.job import Task
from pai.domain.jobspec import ElasticRange
from pai.domain.states import JobState, TaskState
from pai.launcher.job_attempts import job_attempts
from pai.launcher.queries import JobDetail
from pai.protocol.exitcodes import PlatformExit
from pai.rest_server.job_views import job_attempt_view, job_detail
from pai.store.records import JobEvent, TaskAttempt
from tests.launcher.builders import job, role


def _shrunk() -> JobDetail:
    """worker asked 3 (2 to 6), grew to 5 and is shrinking to 4 (worker 4 leaving); ps: one task, no GPU."""
    j = job(replace(role("worker", 3, gpu=1), elastic=ElasticRange(2, 6)), role("ps"))
    run = TaskState.RUNNING
    members = (*(Task("worker", i, run, node="n1", attempt_id=f"w{i}") for i in range(4)),
               Task("worker", 4, TaskState.STOPPING, node="n1", attempt_id="w4", exit_code=int(PlatformExit.SHRUNK)),
               Task("ps", 0, run, node="n1", attempt_id="p0"))
    j = replace(j, state=JobState.RUNNING, started_at=2.0, tasks=members)
    rows = [TaskAttempt(t.attempt_id or "", j.id, 0, t.role, t.index, "n1", t.state, started_at=2.0) for t in members]
    return JobDetail(j, [], rows, [])


def test_the_latest_attempt_counts_the_tasks_and_gpus_of_the_current_size() -> None:
    found = _shrunk()
    latest = job_attempt_view(found, job_attempts(found.job, found.attempts)[-1])
    assert latest["isLatest"]
    assert (latest["totalTaskNumber"], latest["totalGpuNumber"]) == (5, 4)  # 4 workers (not 3 asked, nor 5 held) + ps


def test_the_detail_lists_the_members_and_the_range_and_the_resizes() -> None:
    found = _shrunk()
    resized = JobEvent(found.job.id, 5.0, "resized", "shrank to 4: VC `prod` reclaims 1 GPU", {"role": "worker"})
    detail = job_detail(replace(found, events=[resized]))
    worker = detail["taskRoles"]["worker"]
    assert worker["elastic"] == {"minInstances": 2, "maxInstances": 6, "current": 4}
    assert [t["taskIndex"] for t in worker["taskStatuses"]] == [0, 1, 2, 3, 4]  # beyond the 3 it asked first
    assert "elastic" not in detail["taskRoles"]["ps"]
    assert [(e["kind"], e["message"]) for e in detail["events"]] == [
        ("resized", "shrank to 4: VC `prod` reclaims 1 GPU")]
