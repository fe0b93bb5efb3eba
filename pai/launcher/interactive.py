"""Interactive sessions in a running task (exec, tunnels to its ports): who may open one, the per-user limit (counted in
the database: ``pai.store.sessions``), and the job's history (an event when a session starts and when it ends).

Only the job's owner and admins open sessions; a caller who may not read the job is refused as every read refuses
them. The task must be running (``TaskNotRunningError``, 409). Each function is one transaction (the facade's unit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from pai.domain.errors import TaskNotRunningError
from pai.domain.states import TaskState
from pai.launcher.access import owner_of, require_owner_or_admin, require_reader
from pai.launcher.logs import require_task
from pai.store import history, nodes, sessions
from pai.store import jobs as store_jobs
from pai.store.db import Database
from pai.store.records import User
from pai.store.sessions import OpenSession


@dataclass(frozen=True, slots=True)
class TaskRef:
    """A task of a job, as a request names it."""

    key: str
    role: str
    index: int

    @property
    def name(self) -> str:
        return f"{self.role}[{self.index}]"


@dataclass(frozen=True, slots=True)
class RunningTask:
    """What a session reaches: the running attempt, its node (``address``: the node's; ``agent_port``: its agent's
    HTTP server, which serves ``/logs`` and ``/exec``) and its ports by label (host networking: on the node)."""

    ref: TaskRef
    job_id: str
    attempt_id: str
    node: str
    address: str
    agent_port: int
    ports: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Opening:
    """A session to open: its id, kind (``exec``, ``tunnel``) and what it does (the command, the port)."""

    id: str
    kind: str
    detail: str


def _running(s: Session, user: User, readable_by_all: bool, ref: TaskRef, kind: str) -> RunningTask:
    owner = owner_of(ref.key)
    require_reader(user, owner, readable_by_all)
    require_owner_or_admin(user, owner, f"open {kind} sessions in")
    job = store_jobs.get_job(s, ref.key)
    task = require_task(job, ref.role, ref.index)
    if task.state is not TaskState.RUNNING or task.node is None or task.attempt_id is None:
        raise TaskNotRunningError(f"task {ref.name} of job {ref.key} is not running (state {task.state.value})")
    node = nodes.get_node(s, task.node)
    return RunningTask(ref, job.id, task.attempt_id, node.name, node.address, nodes.get_log_port(s, node.name),
                       dict(task.ports))


def check(db: Database, user: User, readable_by_all: bool, ref: TaskRef, kind: str, *, limit: int,
          stale_after: float) -> None:
    """What ``open_session`` would refuse, without opening one (an answer for a request that is no WebSocket)."""
    with db.session() as s:
        _running(s, user, readable_by_all, ref, kind)
        sessions.require_room(s, user.name, limit=limit, stale_after=stale_after)


def open_session(db: Database, user: User, readable_by_all: bool, ref: TaskRef, opening: Opening, *, limit: int,
                 stale_after: float, now: float) -> RunningTask:
    """Open a session of ``user`` in the running task ``ref``: ForbiddenUserError (not the owner nor an admin, or may
    not read the job), NoJobError, NoTaskRoleError, TaskNotRunningError, TooManySessionsError."""
    with db.session() as s:
        running = _running(s, user, readable_by_all, ref, opening.kind)
        sessions.open_session(s, OpenSession(opening.id, user.name, running.job_id, opening.kind, opening.detail),
                              limit=limit, stale_after=stale_after)
        history.add_event(s, running.job_id, now, f"{opening.kind}-started",
                          f"{opening.kind} session of {user.name} in {ref.name}: {opening.detail}",
                          _details(opening, user.name, running))
    return running


def refresh(db: Database, session_id: str) -> bool:
    """The session lives on; False when its row is gone (its job deleted, or it went stale meanwhile)."""
    with db.session() as s:
        return sessions.touch(s, session_id)


def close_session(db: Database, user: str, task: RunningTask, opening: Opening, *, exit_code: int | None,
                  reason: str | None, seconds: float, now: float) -> None:
    """The session has ended: its row goes, an event says how (``exit_code``, or ``reason``) after how long."""
    how = f"exit code {exit_code}" if exit_code is not None else (reason or "closed")
    with db.session() as s:
        sessions.close_session(s, opening.id)
        if store_jobs.job_exists(s, task.job_id):
            history.add_event(s, task.job_id, now, f"{opening.kind}-ended",
                              f"{opening.kind} session of {user} in {task.ref.name} ended: {how} after "
                              f"{seconds:.0f} s", _details(opening, user, task) | {
                                  "exitCode": exit_code, "reason": reason, "seconds": round(seconds, 3)})


def _details(opening: Opening, user: str, task: RunningTask) -> dict[str, object]:
    return {"session": opening.id, "kind": opening.kind, "user": user, "role": task.ref.role, "index": task.ref.index,
            "detail": opening.detail, "attempt": task.attempt_id, "node": task.node}
