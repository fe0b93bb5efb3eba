"""Users: accounts with a scrypt password hash and an admin flag."""

from __future__ import annotations

import time

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pai.domain.errors import ConflictUserError, NoUserError
from pai.store.credentials import burn_check, check_password, hash_password
from pai.store.records import User
from pai.store.schema import UserRow


def _user(row: UserRow) -> User:
    return User(name=row.name, admin=row.admin)


def _row(s: Session, name: str) -> UserRow | None:
    return s.scalars(select(UserRow).where(UserRow.name == name)).one_or_none()


def _existing(s: Session, name: str) -> UserRow:
    row = _row(s, name)
    if row is None:
        raise NoUserError(f"user {name} not found")
    return row


def create_user(s: Session, name: str, password: str, admin: bool = False, *, now: float | None = None) -> User:
    """Raises ConflictUserError when the name is taken; the session stays usable either way."""
    row = UserRow(
        name=name,
        password_hash=hash_password(password),
        admin=admin,
        created_at=time.time() if now is None else now,
    )
    try:
        with s.begin_nested():
            s.add(row)
    except IntegrityError as e:
        raise ConflictUserError(f"user {name} already exists") from e
    return _user(row)


def get_user(s: Session, name: str) -> User | None:
    row = _row(s, name)
    return None if row is None else _user(row)


def list_users(s: Session) -> list[User]:
    return [_user(row) for row in s.scalars(select(UserRow).order_by(UserRow.name))]


def verify_password(s: Session, name: str, password: str) -> User | None:
    """The user when ``password`` is theirs, else None (an unknown user costs the same time as a wrong password)."""
    row = _row(s, name)
    if row is None:
        burn_check(password)
        return None
    return _user(row) if check_password(password, row.password_hash) else None


def ensure_admin(s: Session, name: str, password: str) -> User:
    """Create ``name`` as an admin when absent; an existing user is left as it is."""
    row = _row(s, name)
    return _user(row) if row is not None else create_user(s, name, password, admin=True)


def set_password(s: Session, name: str, password: str) -> None:
    _existing(s, name).password_hash = hash_password(password)


def set_admin(s: Session, name: str, admin: bool) -> User:
    row = _existing(s, name)
    row.admin = admin
    return _user(row)


def delete_user(s: Session, name: str) -> None:
    """Deletes the user and their tokens; their jobs stay (jobs name their user, they do not reference it)."""
    s.delete(_existing(s, name))
    s.flush()
