"""Users: accounts with a scrypt password hash, an e-mail, a free-form extension and a list of groups. What a user
may do comes from their groups (``pai.domain.groups.rights_of``): there is no admin flag of its own."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pai.domain.errors import ConflictUserError, NoUserError
from pai.domain.groups import ADMIN_GROUP, DEFAULT_GROUP, built_in_groups, rights_of
from pai.store import groups as store_groups
from pai.store.credentials import burn_check, check_password, hash_password
from pai.store.records import User, UserProfile
from pai.store.schema import UserRow


def _profiles(s: Session, rows: Sequence[UserRow]) -> list[UserProfile]:
    lists = store_groups.group_lists(s, [r.id for r in rows])
    known = {g.name: g for g in store_groups.list_groups(s, {n for names in lists.values() for n in names})}
    out = []
    for row in rows:
        names = tuple(lists[row.id])
        rights = rights_of(known[n] for n in names if n in known)
        user = User(row.name, rights.admin, names, rights.virtual_clusters, rights.storages)
        out.append(UserProfile(user, row.email, dict(row.extension or {})))
    return out


def _row(s: Session, name: str) -> UserRow | None:
    return s.scalars(select(UserRow).where(UserRow.name == name)).one_or_none()


def _existing(s: Session, name: str) -> UserRow:
    row = _row(s, name)
    if row is None:
        raise NoUserError(f"User {name} is not found.")
    return row


def ensure_built_in_groups(s: Session) -> None:
    """``default`` and ``admingroup`` exist (the first migration makes them; an emptied database lacks them)."""
    for g in built_in_groups():
        store_groups.ensure_group(s, g)


def starting_groups(admin: bool, more: Sequence[str] = ()) -> list[str]:
    """A new user's groups, as OpenPAI gives them: ``default``, the ones asked for, ``admingroup`` for an admin."""
    return list(dict.fromkeys([DEFAULT_GROUP, *more, *([ADMIN_GROUP] if admin else [])]))


def create_user(s: Session, name: str, password: str, admin: bool = False, *, groups: Sequence[str] = (),
                email: str = "", extension: dict[str, Any] | None = None, now: float | None = None) -> User:
    """A new user in ``starting_groups(admin, groups)``. ConflictUserError when the name is taken, NoGroupError when
    a group does not exist; the session stays usable either way."""
    ensure_built_in_groups(s)
    wanted = store_groups.require_groups(s, starting_groups(admin, groups))
    row = UserRow(name=name, password_hash=hash_password(password), email=email, extension=dict(extension or {}),
                  created_at=time.time() if now is None else now)
    try:
        with s.begin_nested():
            s.add(row)
    except IntegrityError as e:
        raise ConflictUserError(f"User name {name} already exists.") from e
    store_groups.set_group_list(s, row.id, wanted)
    return _profiles(s, [row])[0].user


def get_user(s: Session, name: str) -> User | None:
    row = _row(s, name)
    return None if row is None else _profiles(s, [row])[0].user


def exists(s: Session, name: str) -> bool:
    return s.scalar(select(UserRow.id).where(UserRow.name == name)) is not None


def extension_of(s: Session, name: str) -> dict[str, Any]:
    """A user's extension ({} for a user who does not exist any more)."""
    extension = s.scalar(select(UserRow.extension).where(UserRow.name == name))
    return dict(extension) if isinstance(extension, dict) else {}


def get_profile(s: Session, name: str) -> UserProfile:
    return _profiles(s, [_existing(s, name)])[0]


def list_profiles(s: Session) -> list[UserProfile]:
    return _profiles(s, list(s.scalars(select(UserRow).order_by(UserRow.name))))


def list_users(s: Session) -> list[User]:
    return [p.user for p in list_profiles(s)]


def verify_password(s: Session, name: str, password: str) -> User | None:
    """The user when ``password`` is theirs, else None (an unknown user costs the same time as a wrong password)."""
    row = _row(s, name)
    if row is None:
        burn_check(password)
        return None
    return _profiles(s, [row])[0].user if check_password(password, row.password_hash) else None


def ensure_admin(s: Session, name: str, password: str) -> User:
    """Create ``name`` as an admin when absent; an existing user is left as it is."""
    ensure_built_in_groups(s)
    user = get_user(s, name)
    return user if user is not None else create_user(s, name, password, admin=True)


def has_admin(s: Session) -> bool:
    """Is anyone an admin (a member of a group that grants it)?"""
    granting = [g.name for g in store_groups.list_groups(s) if g.grants_admin]
    return bool(granting) and any(store_groups.members(s, g) for g in granting)


def set_password(s: Session, name: str, password: str) -> None:
    _existing(s, name).password_hash = hash_password(password)


def set_groups(s: Session, name: str, groups: Sequence[str]) -> User:
    """Replace the user's groups (NoGroupError naming any that do not exist)."""
    row = _existing(s, name)
    store_groups.set_group_list(s, row.id, groups)
    return _profiles(s, [row])[0].user


def set_admin(s: Session, name: str, admin: bool) -> User:
    """Make the user an admin (join ``admingroup``) or not (leave every group that grants admin), as OpenPAI."""
    user = get_profile(s, name).user
    if admin == user.admin:
        return user
    if admin:
        return set_groups(s, name, [*user.groups, ADMIN_GROUP])
    granting = {g.name for g in store_groups.list_groups(s, user.groups) if g.grants_admin}
    return set_groups(s, name, [g for g in user.groups if g not in granting])


def set_email(s: Session, name: str, email: str) -> None:
    _existing(s, name).email = email


def merge_extension(s: Session, name: str, extension: dict[str, Any]) -> None:
    """OpenPAI's update of a user's extension: the keys given replace those keys; the others stay."""
    row = _existing(s, name)
    row.extension = {**(row.extension or {}), **extension}


def delete_user(s: Session, name: str) -> None:
    """Deletes the user, their tokens and memberships; their jobs stay (jobs name their user, not reference it)."""
    s.delete(_existing(s, name))
    s.flush()
