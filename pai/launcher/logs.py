"""Where a task attempt's output lives: the node that ran it, and that node's log server."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from pai.domain.errors import NoTaskLogError
from pai.store import history, nodes
from pai.store import jobs as store_jobs

MAX_LOG_BYTES = 16 << 20  # a full read serves at most the last 16 MB of a log (more: ask for a tail)


@dataclass(frozen=True, slots=True)
class LogLocation:
    attempt_id: str
    node: str
    address: str
    port: int


def locate(s: Session, key: str, role: str, index: int, attempt_id: str | None = None) -> LogLocation:
    """The latest attempt of task ``role[index]`` of job ``key``, or the attempt ``attempt_id`` (an earlier
    one). Raises NoJobError, NoTaskLogError."""
    job = store_jobs.get_job(s, key)
    attempts = [a for a in history.list_attempts(s, job.id) if a.role == role and a.index == index]
    if attempt_id is not None:
        attempts = [a for a in attempts if a.attempt_id == attempt_id]
        if not attempts:
            raise NoTaskLogError(f"task {role}[{index}] of job {key} has no attempt {attempt_id}")
    if not attempts or attempts[-1].node is None:
        raise NoTaskLogError(f"task {role}[{index}] of job {key} has no attempt yet")
    chosen = attempts[-1]
    assert chosen.node is not None
    node = nodes.get_node(s, chosen.node)
    return LogLocation(chosen.attempt_id, node.name, node.address, nodes.get_log_port(s, node.name))
