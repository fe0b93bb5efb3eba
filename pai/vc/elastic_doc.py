"""A job's ``elastic`` as a trace or a what-if scenario writes it, the job protocol's ``extras.elastic`` form:
``{"worker": {"minInstances": 2, "maxInstances": 8}}``. The rules are the job protocol's (pai.jobspec.elastic):
every entry names a role of the job, both keys are integers of at least 1, and
``minInstances <= instances <= maxInstances`` where ``instances`` is the role's asked size. Pure: values in,
values out; errors name the field and the rule."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pai.domain.errors import InvalidParametersError
from pai.vc.snapshot import ElasticRole, TaskRequest

RULE = "(minInstances <= instances <= maxInstances)"


def parse_elastic(raw: Any, tasks: Iterable[TaskRequest], where: str) -> tuple[ElasticRole, ...]:
    """The elastic roles of a job of ``tasks`` (``raw``: its ``elastic`` value, None or absent: none)."""
    if raw is None:
        return ()
    path = f"{where}.elastic"
    if not isinstance(raw, Mapping):
        raise InvalidParametersError(f"{path}: expected a mapping of role to {{minInstances, maxInstances}}",
                                     field=path)
    sizes: dict[str, int] = {}
    for t in tasks:
        sizes[t.role] = sizes.get(t.role, 0) + 1
    out: list[ElasticRole] = []
    for role, entry in raw.items():
        at = f"{path}.{role}"
        if role not in sizes:
            raise InvalidParametersError(f"{at}: names no task role (roles: {', '.join(sizes)})", field=at)
        if not isinstance(entry, Mapping) or set(entry) != {"minInstances", "maxInstances"}:
            raise InvalidParametersError(f"{at}: expected {{minInstances, maxInstances}} and nothing else", field=at)
        low, high = _whole(entry, "minInstances", at), _whole(entry, "maxInstances", at)
        size = sizes[role]
        if low > high:
            raise InvalidParametersError(f"{at}: minInstances {low} is greater than maxInstances {high}", field=at)
        if low > size:
            raise InvalidParametersError(f"{at}.minInstances: {low} is greater than instances {size} {RULE}",
                                         field=f"{at}.minInstances")
        if size > high:
            raise InvalidParametersError(f"{at}.maxInstances: {high} is less than instances {size} {RULE}",
                                         field=f"{at}.maxInstances")
        out.append(ElasticRole(str(role), low, high))
    return tuple(out)


def elastic_doc(roles: Iterable[ElasticRole]) -> dict[str, dict[str, int]]:
    """The roles as written (the form ``parse_elastic`` reads)."""
    return {e.role: {"minInstances": e.min_instances, "maxInstances": e.max_instances} for e in roles}


def _whole(entry: Mapping[str, Any], key: str, at: str) -> int:
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidParametersError(f"{at}.{key}: expected an integer, at least 1", field=f"{at}.{key}")
    return value
