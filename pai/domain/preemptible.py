"""Who may submit non-preemptible jobs (``extras.preemptible: false``): the cluster configuration's
``nonPreemptible`` section (job_schemas/vc-config.json). Admins always may; anyone else needs a grant by name, by
one of their groups, or by the job's priority class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pai.domain.errors import ForbiddenUserError

PREEMPTIBLE_FIELD = "extras.preemptible"


@dataclass(frozen=True, slots=True)
class NonPreemptibleGrant:
    priority_classes: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    @classmethod
    def of(cls, section: Mapping[str, Any] | None) -> NonPreemptibleGrant:
        """The (schema-checked) ``nonPreemptible`` section; absent: admins only."""
        section = section or {}
        return cls(*(frozenset(str(v) for v in section.get(key) or ()) for key in ("priorityClasses", "users",
                                                                                   "groups")))

    def allows(self, user: str, groups: Iterable[str], priority_class: str, *, admin: bool = False) -> bool:
        return (admin or user in self.users or priority_class in self.priority_classes
                or not self.groups.isdisjoint(groups))

    def require(self, user: str, groups: Iterable[str], priority_class: str, *, admin: bool = False) -> None:
        """Raise ForbiddenUserError (403, naming the field and the rule) unless ``user`` may run a job of
        ``priority_class`` as non-preemptible."""
        if not self.allows(user, groups, priority_class, admin=admin):
            raise ForbiddenUserError(
                f"{PREEMPTIBLE_FIELD}: user {user} may not submit a non-preemptible job of priority class "
                f"{priority_class!r} (the cluster's nonPreemptible allows {self.describe()})", field=PREEMPTIBLE_FIELD)

    def describe(self) -> str:
        parts = ["admins"]
        for label, names in (("priority classes", self.priority_classes), ("users", self.users),
                             ("groups", self.groups)):
            if names:
                parts.append(f"{label} {', '.join(sorted(names))}")
        return "; ".join(parts)


ADMINS_ONLY = NonPreemptibleGrant()
