"""Jobs and their tasks: insert, look up, list with filters, save state changes.

A job is one ``jobs`` row (the normalized spec as JSON, the submitted text; secrets sealed apart, see
``pai.store.sealing``) plus one ``tasks`` row per instance. Reading always loads a job's tasks with it; lists load
the tasks of all listed jobs in one query.
Attempt history and events live in ``pai.store.history`` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any, cast

from sqlalchemy import Select, Table, bindparam, delete, insert, or_, select, update
from sqlalchemy.orm import Session, selectinload

from pai.domain.errors import ConflictJobError, NoJobError
from pai.domain.job import Job, Task
from pai.domain.states import JobState, TaskState
from pai.store import keyword, sealing
from pai.store.codec import spec_from_dict, spec_to_dict, task_from_row, task_to_row, update_task_row
from pai.store.dialects import insert_new
from pai.store.history import add_event, finish_attempt, list_attempts, list_events, record_attempt
from pai.store.keyring import Keyring
from pai.store.schema import JobRow, TaskRow

__all__ = [
    "active_jobs",
    "active_jobs_on",
    "add_event",
    "delete_job",
    "find_task",
    "finish_attempt",
    "get_config_text",
    "get_job",
    "get_job_by_id",
    "get_jobs_by_id",
    "held_tasks_on",
    "insert_job",
    "list_attempts",
    "list_events",
    "record_attempt",
    "rows_of",
    "save_job",
    "save_jobs",
    "set_waiting_reasons",
    "split_key",
    "tasks_on",
]

# The IN-lists of the rules, from the states' own (``JobState.is_active``, ``TaskState.holds_node``).
_ACTIVE = [st.value for st in JobState if st.is_active()]
_HOLDING = [st.value for st in TaskState if st.holds_node()]


def split_key(key: str) -> tuple[str, str]:
    """``user~name`` -> ``(user, name)``; a key without ``~`` names no job."""
    user, sep, name = key.partition("~")
    if not sep or not user or not name:
        raise NoJobError(f"job {key} not found")
    return user, name


def _to_job(row: JobRow) -> Job:
    spec = spec_from_dict(row.spec)
    if row.sealed is not None:
        spec = replace(spec, sealed=row.sealed)  # its secrets stay sealed until a task starts (sealing.unsealed)
    position = {r.name: i for i, r in enumerate(spec.task_roles)}
    rows = sorted(row.tasks, key=lambda t: (position.get(t.role, len(position)), t.role, t.task_index))
    return Job(
        id=row.id,
        user=row.user_name,
        spec=spec,
        state=JobState(row.state),
        submitted_at=row.submitted_at,
        started_at=row.started_at,
        completed_at=row.completed_at,
        retries=row.retries,
        platform_retries=row.platform_retries,
        exit_code=row.exit_code,
        exit_reason=row.exit_reason,
        waiting_reason=row.waiting_reason,
        preempted_by=row.preempted_by,
        last_resized_at=row.last_resized_at,
        tasks=tuple(task_from_row(t) for t in rows),
    )


def _update_row(row: JobRow, job: Job, keyring: Keyring | None) -> None:
    row.vc = job.vc
    row.state = job.state.value
    row.priority = job.spec.priority
    row.protocol_version = job.spec.protocol_version
    row.spec, row.sealed = sealing.stored(spec_to_dict(job.spec), job.spec.sealed, keyring)
    row.submitted_at = job.submitted_at
    row.started_at = job.started_at
    row.completed_at = job.completed_at
    row.retries = job.retries
    row.platform_retries = job.platform_retries
    row.exit_code = job.exit_code
    row.exit_reason = job.exit_reason
    row.waiting_reason = job.waiting_reason
    row.preempted_by = job.preempted_by
    row.last_resized_at = job.last_resized_at


def _select_jobs() -> Select[JobRow]:
    return select(JobRow).options(selectinload(JobRow.tasks))


def _one(s: Session, query: Select[JobRow], what: str) -> JobRow:
    row = s.scalars(query).one_or_none()
    if row is None:
        raise NoJobError(f"job {what} not found")
    return row


def rows_of(job: Job, config_text: str, keyring: Keyring | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``jobs`` row and the ``tasks`` rows of a new job, as values for a Core INSERT (also for bulk loads). Its
    secrets are masked in the text and the spec and sealed with ``keyring`` (SecretKeyError without one)."""
    row = JobRow(id=job.id, user_name=job.user, name=job.name, config_text=sealing.masked_text(config_text))
    _update_row(row, job, keyring)
    return _values(row), [_values(task_to_row(job.id, t)) for t in job.tasks]


# Core statements on the tables, built once for each dialect: a submission (a user's, a searcher's new trial) is on
# the writer's path. ON CONFLICT DO NOTHING instead of a SAVEPOINT around the insert: a name taken inserts nothing
# (RETURNING says so) and leaves the transaction as it was, on PostgreSQL too.
_JOBS, _TASKS = cast(Table, JobRow.__table__), cast(Table, TaskRow.__table__)
_INSERT_JOB = insert_new(_JOBS, _JOBS.c.id)
_INSERT_TASKS = insert(_TASKS)


def insert_job(s: Session, job: Job, config_text: str) -> None:
    """Store a new job with its tasks. Raises ConflictJobError when ``user~name`` exists, leaving no rows behind."""
    row, tasks = rows_of(job, config_text, s.info.get(sealing.KEYRING_INFO))
    if s.execute(_INSERT_JOB[s.get_bind().dialect.name], row).first() is None:
        raise ConflictJobError(f"job {job.key} already exists")
    if tasks:
        s.execute(_INSERT_TASKS, tasks)
    keyword.add(s, job.id, job.name)


def delete_job(s: Session, job_id: str) -> None:
    """Delete a job with its tasks, attempts, events and tags (their rows go by their foreign keys)."""
    keyword.remove(s, job_id)
    s.execute(delete(JobRow).where(JobRow.id == job_id))


def _values(row: JobRow | TaskRow) -> dict[str, Any]:
    return {c.key: getattr(row, c.key) for c in row.__table__.columns}


def get_job(s: Session, key: str) -> Job:
    user, name = split_key(key)
    row = _one(s, _select_jobs().where(JobRow.user_name == user, JobRow.name == name), key)
    _kept(s, [row])  # a stop's save_job of it (a searcher's stop, a user's) then needs no query
    return _to_job(row)


# built once (its cache key too) and run on the session's connection: the proxy runs it on every request
_FIND_TASK = (select(JobRow.id, TaskRow.state, TaskRow.node, TaskRow.address, TaskRow.ports, TaskRow.attempt_id)
              .join(TaskRow, TaskRow.job_id == JobRow.id)
              .where(JobRow.user_name == bindparam("user"), JobRow.name == bindparam("name"),
                     TaskRow.role == bindparam("role"), TaskRow.task_index == bindparam("index")))


def find_task(s: Session, key: str, role: str, index: int) -> tuple[str, Task] | None:
    """Task ``role[index]`` of job ``key`` and its job's id, in one query of a few columns of its row (the proxy
    asks on every request); None when the job or the task does not exist. Only what says where the task runs is
    read: its GPUs, exit and times are left at their defaults."""
    user, name = split_key(key)
    row = s.connection().execute(_FIND_TASK, {"user": user, "name": name, "role": role, "index": index}).one_or_none()
    if row is None:
        return None
    ports = {label: tuple(p) for label, p in row.ports.items()}
    return row.id, Task(role, index, TaskState(row.state), row.node, row.address, ports, attempt_id=row.attempt_id)


def get_job_by_id(s: Session, job_id: str) -> Job:
    return _to_job(_one(s, _select_jobs().where(JobRow.id == job_id), job_id))


def job_exists(s: Session, job_id: str) -> bool:
    return s.scalar(select(JobRow.id).where(JobRow.id == job_id)) is not None


def key_exists(s: Session, key: str) -> bool:
    """Whether ``user~name`` is a job (in any state)."""
    user, name = split_key(key)
    return s.scalar(select(JobRow.id).where(JobRow.user_name == user, JobRow.name == name)) is not None


def get_config_text(s: Session, key: str) -> str:
    """The job as it was submitted (YAML or JSON text), its secrets' values masked."""
    user, name = split_key(key)
    text = s.scalar(select(JobRow.config_text).where(JobRow.user_name == user, JobRow.name == name))
    if text is None:
        raise NoJobError(f"job {key} not found")
    return text


def _kept(s: Session, rows: Sequence[JobRow]) -> Sequence[JobRow]:
    """Keep ``rows`` for the rest of the transaction: the session's identity map holds rows only weakly, and a
    ``save_job`` of one of these jobs then finds its row there instead of querying again."""
    s.info.setdefault("pai.loaded", []).append(rows)
    return rows


def active_jobs(s: Session) -> list[Job]:
    """Every WAITING, RUNNING or STOPPING job, oldest submission first."""
    query = _select_jobs().where(JobRow.state.in_(_ACTIVE))
    return [_to_job(row) for row in _kept(s, s.scalars(query.order_by(JobRow.submitted_at, JobRow.id)).all())]


def active_jobs_on(s: Session, nodes: Collection[str]) -> list[Job]:
    """The WAITING, RUNNING or STOPPING jobs with a task on one of ``nodes`` (through the index on
    ``tasks.node``), oldest submission first: what a lost node's requeue looks at (a heartbeat reads ``tasks_on``)."""
    if not nodes:
        return []
    on = select(TaskRow.job_id).where(TaskRow.node.in_(list(nodes)))
    query = _select_jobs().where(JobRow.id.in_(on), JobRow.state.in_(_ACTIVE))
    return [_to_job(row) for row in _kept(s, s.scalars(query.order_by(JobRow.submitted_at, JobRow.id)).all())]


# built once (its cache key too): a heartbeat that needs the store runs it
_TASKS_ON = (select(TaskRow.job_id, JobRow.state.label("job_state"), TaskRow.role, TaskRow.task_index, TaskRow.state,
                    TaskRow.node, TaskRow.attempt_id, TaskRow.exit_code, TaskRow.exit_reason)
             .join(JobRow, JobRow.id == TaskRow.job_id)
             .where(TaskRow.node.in_(bindparam("nodes", expanding=True)), JobRow.state.in_(_ACTIVE))
             .order_by(JobRow.submitted_at, JobRow.id, TaskRow.role, TaskRow.task_index))


def tasks_on(s: Session, nodes: Collection[str]) -> list[tuple[str, JobState, Task]]:
    """The tasks placed on one of ``nodes`` of the WAITING, RUNNING or STOPPING jobs, each with its job's id and state:
    ``active_jobs_on``'s jobs (in its order) as the rows of their tasks there show them, in one query of a few columns
    of those rows. No job is decoded (its spec, its other tasks): a heartbeat decodes only the jobs it changes. Only
    what reconciling a node reads of a task is read (its state, node, attempt, exit code and reason): its address,
    ports, GPUs, retries and times are left at their defaults."""
    if not nodes:
        return []
    rows = s.execute(_TASKS_ON, {"nodes": list(nodes)})
    return [(row.job_id, JobState(row.job_state),
             Task(row.role, row.task_index, TaskState(row.state), row.node, attempt_id=row.attempt_id,
                  exit_code=row.exit_code, exit_reason=row.exit_reason))
            for row in rows]


def get_jobs_by_id(s: Session, ids: Collection[str]) -> list[Job]:
    """The jobs of ``ids`` that exist (a deleted id is left out), in no particular order."""
    if not ids:
        return []
    return [_to_job(row) for row in _kept(s, s.scalars(_select_jobs().where(JobRow.id.in_(list(ids)))).all())]


def held_tasks_on(s: Session, nodes: Collection[str]) -> list[Task]:
    """The tasks of active jobs placed on one of ``nodes`` that hold resources there (waiting for their start,
    running, stopping): the ports and GPUs a new placement must not take."""
    query = (select(TaskRow).join(JobRow, JobRow.id == TaskRow.job_id)
             .where(TaskRow.node.in_(list(nodes)), TaskRow.state.in_(_HOLDING),
                    JobRow.state.in_(_ACTIVE)))
    return [task_from_row(row) for row in s.scalars(query)]


def set_waiting_reasons(s: Session, reasons: dict[str, dict[str, Any]]) -> None:
    """Store why each job of ``reasons`` (id -> reason) waits, in one statement; a job no longer WAITING keeps
    what it has (a RUNNING one: why its tasks that wait for a node wait, gangAllocation: false)."""
    if not reasons:
        return
    table = cast(Table, JobRow.__table__)
    s.connection().execute(
        update(table).where(table.c.id == bindparam("job_id"),
                            or_(table.c.state == JobState.WAITING.value, table.c.state == JobState.RUNNING.value))
        .values(waiting_reason=bindparam("reason")),
        [{"job_id": k, "reason": v} for k, v in reasons.items()],
    )


def save_job(s: Session, job: Job) -> None:
    """Write ``job``'s state and every task back; task rows not in ``job.tasks`` are deleted. Raises NoJobError."""
    # By primary key: a row this transaction has loaded already (the usual case) costs no query.
    row = s.get(JobRow, job.id, options=[selectinload(JobRow.tasks)])
    if row is None:
        raise NoJobError(f"job {job.key} not found")
    _update_row(row, job, s.info.get(sealing.KEYRING_INFO))
    existing = {(t.role, t.task_index): t for t in row.tasks}
    tasks: list[TaskRow] = []
    for task in job.tasks:
        task_row = existing.get((task.role, task.index))
        if task_row is None:
            task_row = task_to_row(job.id, task)
        else:
            update_task_row(task_row, task)
        tasks.append(task_row)
    row.tasks = tasks  # written with the rest of the transaction (autoflush sees it before any query)


def save_jobs(s: Session, jobs: Sequence[Job]) -> None:
    for job in jobs:
        save_job(s, job)
