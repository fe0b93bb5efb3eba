"""What the scheduler reads from ``extras``: priority class, gang allocation, preemptibility, GPU (SKU) type per
role, node selectors (the job's, and per role merged over it) and whole nodes."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pai.domain.errors import InvalidProtocolError
from pai.domain.jobspec import DEFAULT_PRIORITY_CLASS, PRIORITY_CLASSES, TaskRoleSpec

PRIORITY_FIELD = "extras.hivedScheduler.jobPriorityClass"


@dataclass(frozen=True, slots=True)
class Extras:
    priority_class: str = DEFAULT_PRIORITY_CLASS
    priority: int = PRIORITY_CLASSES[DEFAULT_PRIORITY_CLASS]
    gang: bool = True
    preemptible: bool = True  # ``preemptible: false`` asks for a right the cluster grants (checked at submission)
    sku_types: dict[str, str] = field(default_factory=dict)  # role name -> GPU type
    node_selector: dict[str, str] = field(default_factory=dict)  # extras.nodeSelector: label -> value, every task
    role_selectors: dict[str, dict[str, str]] = field(default_factory=dict)  # role -> its own, merged over the job's
    whole_nodes: bool = False  # extras.wholeNodes: every task takes a whole node
    expected_seconds: float | None = None  # extras.expectedDurationSeconds: how long it should run (for ETAs)

    def selector_of(self, role: str) -> dict[str, str]:
        """The labels a task of ``role`` needs: the role's selector merged over the job's."""
        own = self.role_selectors.get(role)
        return {**self.node_selector, **own} if own else dict(self.node_selector)

    def with_selectors(self, roles: tuple[TaskRoleSpec, ...]) -> tuple[TaskRoleSpec, ...]:
        """The roles, each with the node selector its tasks need."""
        if not self.node_selector and not self.role_selectors:
            return roles
        return tuple(replace(r, node_selector=self.selector_of(r.name)) for r in roles)

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
        role_selectors: dict[str, dict[str, str]] = {}
        for role, options in (hived.get("taskRoles") or {}).items():
            path = f"extras.hivedScheduler.taskRoles.{role}"
            if role not in roles:
                raise InvalidProtocolError(f"{path}: names no task role (roles: {', '.join(roles)})", field=path)
            sku = options.get("skuType") or options.get("gpuType")
            if sku:
                sku_types[role] = str(sku)
            if options.get("nodeSelector"):
                role_selectors[role] = _selector(options["nodeSelector"])
        gang = bool(extras.get("gangAllocation", True))
        preemptible = extras.get("preemptible") is not False
        return cls(priority_class, classes[priority_class], gang, preemptible, sku_types,
                   _selector(extras.get("nodeSelector") or {}), role_selectors, extras.get("wholeNodes") is True,
                   expected_seconds=None if extras.get("expectedDurationSeconds") is None
                   else float(extras["expectedDurationSeconds"]))


def _selector(labels: Mapping[str, str | int | bool]) -> dict[str, str]:
    """A (schema-checked) node selector with its values as node labels spell them (YAML's ``ssd: true``: "true")."""
    return {str(k): ("true" if v else "false") if isinstance(v, bool) else str(v) for k, v in labels.items()}
