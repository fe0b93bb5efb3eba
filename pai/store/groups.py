"""Groups and memberships (OpenPAI's group model: what a group grants lives in its ``extension.acls``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pai.domain.errors import ConflictGroupError, NoGroupError
from pai.domain.groups import Group
from pai.store.schema import GroupRow, MembershipRow, UserRow


def _group(row: GroupRow) -> Group:
    return Group(row.name, row.description, row.external_name, dict(row.extension or {}))


def _row(s: Session, name: str) -> GroupRow:
    row = s.get(GroupRow, name)
    if row is None:
        raise NoGroupError(f"Group {name} is not found.")
    return row


def get_group(s: Session, name: str) -> Group:
    return _group(_row(s, name))


def find_group(s: Session, name: str) -> Group | None:
    row = s.get(GroupRow, name)
    return None if row is None else _group(row)


def list_groups(s: Session, names: Iterable[str] | None = None) -> list[Group]:
    """Every group by name, or those of ``names`` that exist."""
    query = select(GroupRow).order_by(GroupRow.name)
    if names is not None:
        query = query.where(GroupRow.name.in_(list(names)))
    return [_group(r) for r in s.scalars(query)]


def create_group(s: Session, group: Group, *, now: float | None = None) -> Group:
    """ConflictGroupError when the name is taken; the session stays usable either way."""
    row = GroupRow(name=group.name, description=group.description, external_name=group.external_name,
                   extension=dict(group.extension), created_at=time.time() if now is None else now)
    try:
        with s.begin_nested():
            s.add(row)
    except IntegrityError as e:
        raise ConflictGroupError(f"Group {group.name} already exists.") from e
    return _group(row)


def ensure_group(s: Session, group: Group, *, now: float | None = None) -> Group:
    """``group`` created when absent; an existing group of that name is kept as it is."""
    found = find_group(s, group.name)
    return found if found is not None else create_group(s, group, now=now)


def save_group(s: Session, group: Group) -> Group:
    row = _row(s, group.name)
    row.description, row.external_name, row.extension = group.description, group.external_name, dict(group.extension)
    return _group(row)


def delete_group(s: Session, name: str) -> None:
    """The group and every membership in it (the memberships go by cascade)."""
    _row(s, name)
    s.execute(delete(MembershipRow).where(MembershipRow.group_name == name))
    s.execute(delete(GroupRow).where(GroupRow.name == name))


def group_lists(s: Session, user_ids: Sequence[int]) -> dict[int, list[str]]:
    """Each user's group names, in the order they were given."""
    found: dict[int, list[str]] = {u: [] for u in user_ids}
    if not user_ids:
        return found
    rows = s.execute(select(MembershipRow.user_id, MembershipRow.group_name)
                     .where(MembershipRow.user_id.in_(list(user_ids)))
                     .order_by(MembershipRow.user_id, MembershipRow.position))
    for user_id, name in rows:
        found[user_id].append(name)
    return found


def require_groups(s: Session, names: Sequence[str]) -> list[str]:
    """``names`` without repeats, when each names a group; else NoGroupError naming those that do not."""
    wanted = list(dict.fromkeys(names))
    known = {g.name for g in list_groups(s, wanted)}
    missing = [n for n in wanted if n not in known]
    if missing:
        raise NoGroupError(f"grouplist: no group {', '.join(missing)}", field="grouplist")
    return wanted


def set_group_list(s: Session, user_id: int, names: Sequence[str]) -> None:
    """Replace a user's groups (each must exist: NoGroupError naming those that do not)."""
    wanted = require_groups(s, names)
    s.execute(delete(MembershipRow).where(MembershipRow.user_id == user_id))
    s.add_all(MembershipRow(user_id=user_id, group_name=n, position=i) for i, n in enumerate(wanted))
    s.flush()


def members(s: Session, group: str) -> list[str]:
    """The names of the group's users, by name."""
    return list(s.scalars(select(UserRow.name).join(MembershipRow, MembershipRow.user_id == UserRow.id)
                          .where(MembershipRow.group_name == group).order_by(UserRow.name)))


def count(s: Session) -> int:
    return int(s.scalar(select(func.count()).select_from(GroupRow)) or 0)
