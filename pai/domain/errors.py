"""The PaiError family: every error a client can see, with OpenPAI's codes and an HTTP status."""

from __future__ import annotations


class PaiError(Exception):
    """Base of every error that reaches a client as ``{code, message}``."""

    code: str = "UnknownError"
    status: int = 500

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.line: int | None = None  # where a submitted document has the field at fault (1-based), when known

    def to_body(self) -> dict[str, str | int | None]:
        body: dict[str, str | int | None] = {"code": self.code, "message": self.message}
        if self.line is not None:
            body["line"] = self.line
        return body


class InvalidProtocolError(PaiError):
    """A job spec that does not follow the job protocol; ``field`` is the JSON path."""

    code = "InvalidProtocolError"
    status = 400


class InvalidParametersError(PaiError):
    code = "InvalidParametersError"
    status = 400


class UnauthorizedUserError(PaiError):
    code = "UnauthorizedUserError"
    status = 401


class IncorrectPasswordError(PaiError):
    code = "IncorrectPasswordError"
    status = 400


class ForbiddenUserError(PaiError):
    code = "ForbiddenUserError"
    status = 403


class NoApiError(PaiError):
    """A path under ``/api`` that names no operation (OpenPAI: 404, whatever the method)."""

    code = "NoApiError"
    status = 404


class NoJobError(PaiError):
    code = "NoJobError"
    status = 404


class NoUserError(PaiError):
    code = "NoUserError"
    status = 404


class UnknownUserError(NoUserError):
    """OpenPAI answers a login or a read of a user naming no user with 400, where a change to one is a 404."""

    status = 400


class NoGroupError(PaiError):
    code = "NoGroupError"
    status = 404


class UnknownGroupError(NoGroupError):
    """OpenPAI answers a read of a group naming no group with 400, where a change naming one is a 404."""

    status = 400


class NoVirtualClusterError(PaiError):
    code = "NoVirtualClusterError"
    status = 404


class NoStorageError(PaiError):
    code = "NoStorageError"
    status = 404


class NoNodeError(PaiError):
    code = "NoNodeError"
    status = 404


class NoTaskError(PaiError):
    code = "NoTaskError"
    status = 404


class NoTaskRoleError(PaiError):
    """A job has no task role of that name, or no task of that index in the role."""

    code = "NoTaskRoleError"
    status = 404


class TooManySessionsError(PaiError):
    """A user's interactive sessions (exec, tunnels) at the cluster's limit (``pai master --max-sessions-per-user``)."""

    code = "TooManySessionsError"
    status = 429


class TaskNotRunningError(PaiError):
    """A task (or attempt) that must be running for the request (exec, tunnel, ssh) and is not."""

    code = "TaskNotRunningError"
    status = 409


class NodeUnavailableError(PaiError):
    """A node's agent that does not answer the master (for an exec, a tunnel): the task cannot be reached now."""

    code = "NodeUnavailableError"
    status = 502


class NoTaskLogError(PaiError):
    """OpenPAI's answer for a task attempt that has no log (unknown, or never started)."""

    code = "NoTaskLogError"
    status = 404


class NoTaskPortError(PaiError):
    """A task has no port of that label; the message names the labels it has."""

    code = "NoTaskPortError"
    status = 404


class TaskPortUnreachableError(PaiError):
    """A running task's port did not take a connection from the master (nothing listens there yet, or the node is
    not reachable)."""

    code = "TaskPortUnreachableError"
    status = 502


class NoJobSshInfoError(PaiError):
    """OpenPAI's answer for a job whose tasks cannot be reached by SSH."""

    code = "NoJobSshInfoError"
    status = 404


class ConflictJobError(PaiError):
    code = "ConflictJobError"
    status = 409


class ConflictUserError(PaiError):
    code = "ConflictUserError"
    status = 409


class ConflictGroupError(PaiError):
    code = "ConflictGroupError"
    status = 409


class RemoveAdminError(PaiError):
    """An admin cannot be deleted (OpenPAI: demote first)."""

    code = "RemoveAdminError"
    status = 403


class ConflictVirtualClusterError(PaiError):
    code = "ConflictVirtualClusterError"
    status = 409


class NoExperimentError(PaiError):
    code = "NoExperimentError"
    status = 404


class NoTrialError(PaiError):
    code = "NoTrialError"
    status = 404


class ConflictExperimentError(PaiError):
    code = "ConflictExperimentError"
    status = 409


class InvalidTransitionError(PaiError):
    """A state change the transition table does not allow: a bug or a race, never user input."""

    code = "InvalidTransitionError"
    status = 409

    def __init__(self, kind: str, current: str, new: str) -> None:
        super().__init__(f"{kind} cannot go from {current} to {new}")
        self.kind = kind
        self.current = current
        self.new = new


class FencedError(PaiError):
    """A write or command of a leader whose lease has moved on: ``epoch`` is the one it led at, ``current`` the lease's
    now (None: no such lease), ``holder`` who holds it ("" when released). Never user input: the launcher steps down."""

    code = "FencedError"
    status = 503

    def __init__(self, lease: str, epoch: int, current: int | None, holder: str | None) -> None:
        now = "no such lease" if current is None else f"the lease is at epoch {current}, held by {holder or 'nobody'}"
        super().__init__(f"lease {lease}: epoch {epoch} is fenced off ({now})")
        self.lease = lease
        self.epoch = epoch
        self.current = current
        self.holder = holder


class NotLeaderError(PaiError):
    """An agent's request to a standby master (one whose launcher does not hold the lease): ``leader`` is the base URL
    the leader advertises, None when no master leads right now. The agent moves to it."""

    code = "NotLeaderError"
    status = 503

    def __init__(self, leader: str | None) -> None:
        where = f"the leader is {leader}" if leader else "no master leads right now"
        super().__init__(f"this master is a standby; {where}")
        self.leader = leader

    def to_body(self) -> dict[str, str | int | None]:
        return {**super().to_body(), "leader": self.leader}


class MasterRunningError(PaiError):
    """A second master on one SQLite file (the lease is held by the master at ``url``): refused at start."""

    code = "MasterRunningError"
    status = 503

    def __init__(self, database: str, url: str) -> None:
        super().__init__(f"another master uses {database}: {url} holds its lease; stop it first, or give this one "
                         "another --data-dir or a PostgreSQL --database-url (on PostgreSQL a second master is a "
                         "standby)")
        self.database = database
        self.url = url
