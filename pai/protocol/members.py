"""An elastic job's current membership, as the master sends it to the agents of the job's tasks (issue 31).

A running task cannot see its job change size through its environment (``PAI_TASK_ROLE_<role>_HOST_LIST`` is fixed
when it starts), so the agent keeps a file in the task up to date (``pai.nodeagent.members``): the start command
carries the membership when the task starts, and a reply carries it again for every elastic job with a task on the
node whenever the store handled the heartbeat (the launcher makes every node of a job whose membership changed
heartbeat through the store, and pokes it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Member:
    """One task of the job now: its index, its node's address and its labelled ports."""

    index: int
    host: str
    ports: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "host": self.host, "ports": {k: list(v) for k, v in self.ports.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Member:
        ports = {str(k): tuple(int(p) for p in v) for k, v in (d.get("ports") or {}).items()}
        return cls(int(d["index"]), str(d["host"]), ports)


@dataclass(frozen=True, slots=True)
class JobMembers:
    """The members of every role of one elastic job, in index order (roles in the spec's order)."""

    job_key: str
    roles: dict[str, tuple[Member, ...]]

    def document(self) -> dict[str, list[dict[str, Any]]]:
        """What the task reads: ``{role: [{index, host, ports}]}``."""
        return {role: [m.to_dict() for m in members] for role, members in self.roles.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"jobKey": self.job_key, "roles": self.document()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobMembers:
        roles = {str(r): tuple(Member.from_dict(m) for m in ms) for r, ms in (d.get("roles") or {}).items()}
        return cls(str(d["jobKey"]), roles)
