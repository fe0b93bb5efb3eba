"""Nodes: the worker machines agents registered, with their capacity, state and heartbeat."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import cast

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.orm import Session

from pai.domain.errors import NoNodeError
from pai.domain.neverfits import NodeCapacity
from pai.domain.node import Node, NodeState
from pai.domain.resources import Resources
from pai.store.codec import node_from_row, update_node_row
from pai.store.schema import NodeRow


def _existing(s: Session, name: str) -> NodeRow:
    row = s.get(NodeRow, name)
    if row is None:
        raise NoNodeError(f"node {name} not found")
    return row


def upsert_node(s: Session, node: Node, log_port: int | None = None) -> None:
    """Insert ``node`` or overwrite every field of the stored one (state included) with its values.

    ``log_port``, when given, overrides ``node.log_port``.
    """
    row = s.get(NodeRow, node.name)
    if row is None:
        row = NodeRow(name=node.name)
        s.add(row)
    update_node_row(row, node)
    if log_port is not None:
        row.log_port = log_port
    s.flush()


def list_nodes(s: Session) -> list[Node]:
    return [node_from_row(row) for row in s.scalars(select(NodeRow).order_by(NodeRow.name))]


def capacities(s: Session) -> list[NodeCapacity]:
    """Every node's capacity, less its failed GPUs, whatever its state (a submission's check: one narrow query)."""
    query = select(NodeRow.name, NodeRow.gpu, NodeRow.cpu, NodeRow.memory_mb, NodeRow.gpu_type, NodeRow.labels,
                   NodeRow.failed_gpus).order_by(NodeRow.name)
    return [NodeCapacity(name, Resources(max(gpu - len(failed or ()), 0), cpu, memory_mb), gpu_type,
                         dict(labels or {}))
            for name, gpu, cpu, memory_mb, gpu_type, labels, failed in s.execute(query)]


def get_nodes(s: Session, names: Collection[str]) -> list[Node]:
    """The nodes of ``names`` that exist."""
    query = select(NodeRow).where(NodeRow.name.in_(list(names))).order_by(NodeRow.name)
    return [node_from_row(row) for row in s.scalars(query)]


def get_node(s: Session, name: str) -> Node:
    """Raises NoNodeError."""
    return node_from_row(_existing(s, name))


def get_log_port(s: Session, name: str) -> int:
    """The port the node's agent serves task logs on (0: unknown). Raises NoNodeError."""
    return _existing(s, name).log_port


def set_node_state(s: Session, name: str, state: NodeState) -> None:
    """The node's current state; LOST keeps what an admin set, anything else is also the admin's choice."""
    row = _existing(s, name)
    row.state = state.value
    if state is not NodeState.LOST:
        row.admin_state = state.value if state in (NodeState.CORDONED, NodeState.DRAINING) else None
    s.flush()


def touch_heartbeats(s: Session, beats: Mapping[str, float]) -> None:
    """Record the heartbeat times of ``beats`` (node -> time) in one statement; a later stored time is kept, and
    a node not stored is left out."""
    if not beats:
        return
    table = cast(Table, NodeRow.__table__)
    s.connection().execute(
        update(table).where(table.c.name == bindparam("node"), table.c.last_heartbeat < bindparam("at"))
        .values(last_heartbeat=bindparam("at")),
        [{"node": n, "at": t} for n, t in beats.items()],
    )


def delete_node(s: Session, name: str) -> None:
    s.delete(_existing(s, name))
    s.flush()
