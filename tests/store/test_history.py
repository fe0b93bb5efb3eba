"""A job's history: task attempts and events."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from pai.domain.errors import NoTaskError
from pai.domain.states import TaskState
from pai.store import jobs
from pai.store.db import Database
from pai.store.records import JobEvent, TaskAttempt

from .builders import job


@pytest.fixture
def job_id(db: Database) -> str:
    value = job("hist")
    with db.session() as s:
        jobs.insert_job(s, value, "x")
        jobs.insert_job(s, job("other"), "y")
    return value.id


def attempt(job_id: str, attempt_id: str, job_attempt: int, started_at: float, index: int = 0) -> TaskAttempt:
    return TaskAttempt(attempt_id, job_id, job_attempt, "worker", index, node="n1", started_at=started_at)


def test_attempts_are_kept_in_order(db: Database, job_id: str) -> None:
    with db.session() as s:
        jobs.record_attempt(s, attempt(job_id, "c", 1, 30.0))
        jobs.record_attempt(s, attempt(job_id, "a", 0, 10.0))
        jobs.record_attempt(s, attempt(job_id, "b", 0, 10.0, index=1))
    with db.session() as s:
        assert [a.attempt_id for a in jobs.list_attempts(s, job_id)] == ["a", "b", "c"]
        assert jobs.list_attempts(s, "another-job") == []


def test_finish_attempt_records_the_exit(db: Database, job_id: str) -> None:
    with db.session() as s:
        jobs.record_attempt(s, attempt(job_id, "a", 0, 10.0))
        done = jobs.finish_attempt(s, "a", state=TaskState.FAILED, finished_at=20.5, exit_code=137, exit_reason="OOM")
    expected = TaskAttempt(
        "a",
        job_id,
        0,
        "worker",
        0,
        node="n1",
        state=TaskState.FAILED,
        exit_code=137,
        exit_reason="OOM",
        started_at=10.0,
        finished_at=20.5,
    )
    assert done == expected
    with db.session() as s:
        assert jobs.list_attempts(s, job_id) == [expected]


def test_finish_unknown_attempt(db: Database) -> None:
    with db.session() as s, pytest.raises(NoTaskError, match="zzz"):
        jobs.finish_attempt(s, "zzz", state=TaskState.SUCCEEDED, finished_at=1.0)


def test_events_oldest_first_with_details(db: Database, job_id: str) -> None:
    details = {"by": "bob~big", "rule": "reclaim", "gpus": [0, 1]}
    with db.session() as s:
        jobs.add_event(s, job_id, 20.0, "preempted", "preempted by bob~big under reclaim", details)
        jobs.add_event(s, job_id, 10.0, "submitted", "submitted")
        jobs.add_event(s, job_id, 20.0, "requeued", "back in the queue")
    with db.session() as s:
        events = jobs.list_events(s, job_id)
    assert [(e.kind, e.details) for e in events] == [
        ("submitted", None),
        ("preempted", details),
        ("requeued", None),
    ]
    assert events[1] == JobEvent(job_id, 20.0, "preempted", "preempted by bob~big under reclaim", details, events[1].id)
    assert len({e.id for e in events}) == 3 and None not in {e.id for e in events}


def test_event_for_unknown_job_is_refused(db: Database) -> None:
    with pytest.raises(IntegrityError, match=r"(?i)foreign key"), db.session() as s:
        jobs.add_event(s, "no-such-job", 1.0, "k", "m")


def test_mark_attempt_running_sets_state_and_start(db: Database, job_id: str) -> None:
    from pai.store import history

    with db.session() as s:
        history.record_attempt(s, TaskAttempt("a", job_id, 0, "worker", 0, state=TaskState.WAITING, started_at=1.0))
        history.mark_attempt_running(s, "a", 5.0)
    with db.session() as s:
        (got,) = history.list_attempts(s, job_id)
    assert (got.state, got.started_at) == (TaskState.RUNNING, 5.0)
    with db.session() as s, pytest.raises(NoTaskError):
        history.mark_attempt_running(s, "missing", 5.0)


def test_an_attempt_is_updated_beside_others_added_in_the_same_transaction(db: Database, job_id: str) -> None:
    """A heartbeat ends some attempts and a pass adds others in one transaction: each update writes its own row only
    (the attempt itself first if it was added in that transaction), and every row added is stored at the commit."""
    from pai.store import history

    with db.session() as s:
        history.record_attempt(s, attempt(job_id, "a", 0, 1.0))
    with db.session() as s:
        history.record_attempt(s, attempt(job_id, "b", 0, 2.0, index=1))
        history.record_attempt(s, attempt(job_id, "c", 0, 3.0, index=2))
        done = history.finish_attempt(s, "a", state=TaskState.SUCCEEDED, finished_at=4.0, exit_code=0)
        history.mark_attempt_running(s, "c", 5.0)
    assert (done.attempt_id, done.started_at, done.finished_at, done.node) == ("a", 1.0, 4.0, "n1")
    with db.session() as s:
        got = {a.attempt_id: (a.state, a.started_at, a.finished_at) for a in history.list_attempts(s, job_id)}
    assert got == {"a": (TaskState.SUCCEEDED, 1.0, 4.0), "b": (TaskState.RUNNING, 2.0, None),
                   "c": (TaskState.RUNNING, 5.0, None)}
