"""Virtual clusters and the cluster-wide settings: the cluster configuration as the master keeps it.

A VC is stored as written (its entry of ``job_schemas/vc-config.json``, percents unresolved) with a status:
``running`` (normal), ``stopped`` (no submissions, nothing admitted) or ``draining`` (no submissions; its
queue still runs).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pai.domain.errors import NoVirtualClusterError
from pai.store.schema import ClusterSettingRow, VirtualClusterRow


class VcStatus(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"
    DRAINING = "draining"

    def accepts_jobs(self) -> bool:
        return self is VcStatus.RUNNING

    def admits_jobs(self) -> bool:
        return self is not VcStatus.STOPPED


@dataclass(frozen=True, slots=True)
class StoredVc:
    name: str
    spec: dict[str, Any]
    status: VcStatus
    updated_at: float


def _stored(row: VirtualClusterRow) -> StoredVc:
    return StoredVc(row.name, dict(row.spec), VcStatus(row.status), row.updated_at)


def list_vcs(s: Session) -> list[StoredVc]:
    """In configuration order."""
    rows = s.scalars(select(VirtualClusterRow).order_by(VirtualClusterRow.position, VirtualClusterRow.name))
    return [_stored(r) for r in rows]


def get_vc(s: Session, name: str) -> StoredVc:
    row = s.get(VirtualClusterRow, name)
    if row is None:
        raise NoVirtualClusterError(f"virtual cluster {name} not found")
    return _stored(row)


def put_vc(s: Session, spec: dict[str, Any], now: float, status: VcStatus | None = None) -> StoredVc:
    """Create or replace the VC named by ``spec["name"]``; a new VC goes last; the status is kept unless given."""
    name = str(spec["name"])
    row = s.get(VirtualClusterRow, name)
    if row is None:
        last = s.scalar(select(func.max(VirtualClusterRow.position)))
        row = VirtualClusterRow(name=name, position=(last if last is not None else -1) + 1,
                                status=(status or VcStatus.RUNNING).value)
        s.add(row)
    elif status is not None:
        row.status = status.value
    row.spec = dict(spec)
    row.updated_at = now
    s.flush()
    return _stored(row)


def set_vc_status(s: Session, name: str, status: VcStatus, now: float) -> StoredVc:
    row = s.get(VirtualClusterRow, name)
    if row is None:
        raise NoVirtualClusterError(f"virtual cluster {name} not found")
    row.status = status.value
    row.updated_at = now
    s.flush()
    return _stored(row)


def delete_vc(s: Session, name: str) -> None:
    row = s.get(VirtualClusterRow, name)
    if row is None:
        raise NoVirtualClusterError(f"virtual cluster {name} not found")
    s.delete(row)
    s.flush()


def get_setting(s: Session, key: str) -> Any:
    """A section of the cluster configuration as written (a JSON object or list); None when never set."""
    row = s.get(ClusterSettingRow, key)
    return None if row is None else copy.deepcopy(row.value)


def put_setting(s: Session, key: str, value: dict[str, Any] | list[Any]) -> None:
    row = s.get(ClusterSettingRow, key)
    if row is None:
        s.add(ClusterSettingRow(key=key, value=copy.deepcopy(value)))
    else:
        row.value = copy.deepcopy(value)
    s.flush()
