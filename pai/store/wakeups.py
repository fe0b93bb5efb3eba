"""Wake-ups for the leading launcher: what a user's write changed, sent with the write itself.

A request served by any process of any master writes the store; the launcher that acts is the leader's, often in
another process. Each function below is called inside the writing transaction. On PostgreSQL it queues a
notification on the channel ``CHANNEL`` (``pg_notify``, bound parameters): PostgreSQL delivers it to every session
that listens (``pai.launcher.listener``) once the transaction commits, and drops it if it rolls back. On SQLite
(one master, one process) it does nothing: the writer calls the launcher in-process, as always.

A payload is ``<kind>:<key>`` (``job:<id>``, ``node:<name>``, ``cluster:``), well under PostgreSQL's 8,000 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

CHANNEL = "pai_launcher"
JOB, NODE, CLUSTER = "job", "node", "cluster"
KINDS = frozenset({JOB, NODE, CLUSTER})


@dataclass(frozen=True, slots=True)
class Wakeup:
    kind: str  # JOB, NODE, CLUSTER
    key: str  # the job's id, the node's name; "" for the cluster

    def payload(self) -> str:
        return f"{self.kind}:{self.key}"


def parse(payload: str) -> Wakeup | None:
    """The wake-up a payload names; None when it names none (another sender on the channel, a newer master)."""
    kind, sep, key = payload.partition(":")
    if not sep or kind not in KINDS or (kind != CLUSTER and not key):
        return None
    return Wakeup(kind, key)


def job_changed(s: Session, job_id: str) -> None:
    """A job was submitted, stopped or given another priority: the leader's next pass looks at it."""
    _notify(s, Wakeup(JOB, job_id))


def node_changed(s: Session, name: str) -> None:
    """A node was cordoned, drained or uncordoned: the leader's next pass is a full one."""
    _notify(s, Wakeup(NODE, name))


def cluster_changed(s: Session) -> None:
    """The cluster configuration changed: the leader's next pass reads it again."""
    _notify(s, Wakeup(CLUSTER, ""))


_NOTIFY = select(func.pg_notify(CHANNEL, bindparam("payload")))


def _notify(s: Session, wakeup: Wakeup) -> None:
    if s.get_bind().dialect.name == "postgresql":
        s.execute(_NOTIFY, {"payload": wakeup.payload()})
