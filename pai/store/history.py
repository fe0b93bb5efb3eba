"""A job's history: every task attempt, and events such as "preempted by X under rule Y"."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from pai.domain.errors import NoTaskError
from pai.domain.states import TaskState
from pai.store.records import JobEvent, TaskAttempt
from pai.store.schema import JobEventRow, TaskAttemptRow


def _attempt(row: TaskAttemptRow) -> TaskAttempt:
    return TaskAttempt(
        attempt_id=row.attempt_id,
        job_id=row.job_id,
        job_attempt=row.job_attempt,
        role=row.role,
        index=row.task_index,
        node=row.node,
        state=TaskState(row.state),
        exit_code=row.exit_code,
        exit_reason=row.exit_reason,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


# An attempt is closed or marked running by one UPDATE, built once, on the session's connection: a heartbeat does it
# for every task that started or ended, and loading each row first (or an ORM UPDATE) cost several times as much.
_ATTEMPT = cast(Table, TaskAttemptRow.__table__)
_FINISH = (update(_ATTEMPT).where(_ATTEMPT.c.attempt_id == bindparam("id"))
           .values(state=bindparam("state"), finished_at=bindparam("finished_at"), exit_code=bindparam("exit_code"),
                   exit_reason=bindparam("exit_reason"))
           .returning(_ATTEMPT.c.job_id, _ATTEMPT.c.job_attempt, _ATTEMPT.c.role, _ATTEMPT.c.task_index,
                      _ATTEMPT.c.node, _ATTEMPT.c.started_at))
_RUNNING = (update(_ATTEMPT).where(_ATTEMPT.c.attempt_id == bindparam("id"))
            .values(state=TaskState.RUNNING.value, started_at=bindparam("started_at")))


def _connection(s: Session, attempt_id: str) -> Connection:
    """The session's connection, once the attempt is written if it was added in this transaction (``record_attempt``
    leaves it to the flush): an UPDATE on the connection does not flush first, as the session's own statements do.
    The other rows added wait for the flush they would have had."""
    if any(isinstance(row, TaskAttemptRow) and row.attempt_id == attempt_id for row in s.new):
        s.flush()
    return s.connection()


def record_attempt(s: Session, attempt: TaskAttempt) -> None:
    """Remember a new attempt (usually in state RUNNING, with ``started_at`` set)."""
    s.add(
        TaskAttemptRow(
            attempt_id=attempt.attempt_id,
            job_id=attempt.job_id,
            job_attempt=attempt.job_attempt,
            role=attempt.role,
            task_index=attempt.index,
            node=attempt.node,
            state=attempt.state.value,
            exit_code=attempt.exit_code,
            exit_reason=attempt.exit_reason,
            started_at=attempt.started_at,
            finished_at=attempt.finished_at,
        )
    )  # written with the rest of the transaction (a pass records thousands: one flush, not one each)


def finish_attempt(
    s: Session,
    attempt_id: str,
    *,
    state: TaskState,
    finished_at: float,
    exit_code: int | None = None,
    exit_reason: str | None = None,
) -> TaskAttempt:
    """Close an attempt with its final state and exit. Raises NoTaskError for an unknown attempt id."""
    values = {"id": attempt_id, "state": state.value, "finished_at": finished_at, "exit_code": exit_code,
              "exit_reason": exit_reason}
    row = _connection(s, attempt_id).execute(_FINISH, values).first()
    if row is None:
        raise NoTaskError(f"task attempt {attempt_id} not found")
    return TaskAttempt(attempt_id, row.job_id, row.job_attempt, row.role, row.task_index, row.node, state, exit_code,
                       exit_reason, row.started_at, finished_at)


def mark_attempt_running(s: Session, attempt_id: str, started_at: float) -> None:
    """The agent reported the attempt running. Raises NoTaskError for an unknown attempt id."""
    result = _connection(s, attempt_id).execute(_RUNNING, {"id": attempt_id, "started_at": started_at})
    if not result.rowcount:
        raise NoTaskError(f"task attempt {attempt_id} not found")


def list_attempts(s: Session, job_id: str) -> list[TaskAttempt]:
    """All attempts of a job in the order they started."""
    query = select(TaskAttemptRow).where(TaskAttemptRow.job_id == job_id)
    order = (TaskAttemptRow.job_attempt, TaskAttemptRow.started_at, TaskAttemptRow.role, TaskAttemptRow.task_index)
    return [_attempt(row) for row in s.scalars(query.order_by(*order))]


def add_event(
    s: Session, job_id: str, now: float, kind: str, message: str, details: dict[str, Any] | None = None
) -> None:
    """Add an event to the job's history (written with the rest of the transaction)."""
    s.add(JobEventRow(job_id=job_id, at=now, kind=kind, message=message, details=details))


def list_events(s: Session, job_id: str) -> list[JobEvent]:
    """A job's events, oldest first."""
    query = select(JobEventRow).where(JobEventRow.job_id == job_id).order_by(JobEventRow.at, JobEventRow.id)
    return [
        JobEvent(job_id=r.job_id, at=r.at, kind=r.kind, message=r.message, details=r.details, id=r.id)
        for r in s.scalars(query)
    ]
