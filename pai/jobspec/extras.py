"""What the scheduler reads from ``extras``: priority class, gang allocation, preemptibility, GPU (SKU) type per
role."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pai.domain.errors import InvalidProtocolError
from pai.domain.jobspec import DEFAULT_PRIORITY_CLASS, PRIORITY_CLASSES

PRIORITY_FIELD = "extras.hivedScheduler.jobPriorityClass"


@dataclass(frozen=True, slots=True)
class Extras:
    priority_class: str = DEFAULT_PRIORITY_CLASS
    priority: int = PRIORITY_CLASSES[DEFAULT_PRIORITY_CLASS]
    gang: bool = True
    preemptible: bool = True  # ``preemptible: false`` asks for a right the cluster grants (checked at submission)
    sku_types: dict[str, str] = field(default_factory=dict)  # role name -> GPU type

    @classmethod
    def read(
        cls, extras: Mapping[str, Any] | None, roles: Collection[str], classes: Mapping[str, int] = PRIORITY_CLASSES
    ) -> Extras:
        """Read (schema-checked) ``extras``; an unknown priority class or role is an InvalidProtocolError.

        ``classes``: the priority classes of the cluster (OpenPAI's plus the admin's)."""
        extras = extras or {}
        hived: Mapping[str, Any] = extras.get("hivedScheduler") or {}
        priority_class = hived.get("jobPriorityClass") or DEFAULT_PRIORITY_CLASS
        if priority_class not in classes:
            raise InvalidProtocolError(
                f"{PRIORITY_FIELD}: {priority_class!r} is not one of {sorted(classes)}", field=PRIORITY_FIELD
            )
        sku_types: dict[str, str] = {}
        for role, options in (hived.get("taskRoles") or {}).items():
            path = f"extras.hivedScheduler.taskRoles.{role}"
            if role not in roles:
                raise InvalidProtocolError(f"{path}: names no task role (roles: {', '.join(roles)})", field=path)
            sku = options.get("skuType") or options.get("gpuType")
            if sku:
                sku_types[role] = str(sku)
        gang = bool(extras.get("gangAllocation", True))
        preemptible = extras.get("preemptible") is not False
        return cls(priority_class, classes[priority_class], gang, preemptible, sku_types)
