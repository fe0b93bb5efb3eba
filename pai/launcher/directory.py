"""Users and groups as OpenPAI's user and group APIs manage them: one transaction each, on the store thread.

Who may call what (admin, the user themself) is checked here, in the transaction that makes the change, from the
caller as the request resolved them. Every change bumps the "accounts" generation in its transaction
(``pai.store.generations``), which every process's token cache follows (``Accounts.caller``), and clears this
process's at once (``Accounts.invalidate``): a user's rights come from their groups, so a demoted admin or a user
removed from a VC's group is refused on the next request to any master.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from pai.domain.errors import (
    ForbiddenUserError,
    NoGroupError,
    NoUserError,
    NoVirtualClusterError,
    RemoveAdminError,
    UnknownGroupError,
    UnknownUserError,
)
from pai.domain.groups import ADMIN_GROUP, BUILT_IN, DEFAULT_GROUP, Group
from pai.launcher import cluster
from pai.launcher.accounts import Accounts
from pai.store import generations, groups, tokens, users
from pai.store.db import Database
from pai.store.records import User, UserProfile


@dataclass(frozen=True, slots=True)
class UserChanges:
    """What ``PUT /api/v2/users`` (admin) or ``/users/me`` asks to change; None: leave as it is."""

    email: str | None = None
    virtual_clusters: tuple[str, ...] | None = None
    admin: bool | None = None
    password: str | None = None
    old_password: str | None = None  # the user's own change needs it
    extension: dict[str, Any] | None = None


def require_admin(by: User) -> None:
    if not by.admin:
        raise ForbiddenUserError("Non-admin is not allow to do this operation.")


def _require_self_or_admin(by: User, name: str) -> None:
    if not by.admin and by.name != name:
        raise ForbiddenUserError(f"User {by.name} may not change user {name}; only they or an admin may.")


class Directory:
    def __init__(self, db: Database, clock: Callable[[], float], accounts: Accounts,
                 clusters: cluster.ClusterCache) -> None:
        self.db = db
        self.clock = clock
        self.accounts = accounts
        self.clusters = clusters

    def _shown(self, s: Session, profiles: list[UserProfile]) -> list[UserProfile]:
        """Profiles as OpenPAI shows them: an admin's virtual clusters are all of them."""
        if not any(p.user.admin for p in profiles):
            return profiles
        every = frozenset({cluster.DEFAULT_VC, *(v.name for v in self.clusters.get(s).config.vcs)})
        return [replace(p, user=replace(p.user, virtual_clusters=every)) if p.user.admin else p for p in profiles]

    @contextmanager
    def _changing(self) -> Iterator[Session]:
        """A transaction that changes users or groups. It may not leave a cluster that had an admin without one
        (demoting, deleting or regrouping the last admin is refused, whichever call it comes by)."""
        try:
            with self.db.session() as s:
                had_admin = users.has_admin(s)
                yield s
                s.flush()
                if had_admin and not users.has_admin(s):
                    raise ForbiddenUserError("the cluster would have no admin left; make another user an admin "
                                             "first")
                generations.bump(s, generations.ACCOUNTS)  # every process's token cache reloads
        finally:
            self.accounts.invalidate()

    # ---- users ----------------------------------------------------------------------------------

    def users(self) -> list[UserProfile]:
        with self.db.session() as s:
            return self._shown(s, users.list_profiles(s))

    def user(self, name: str) -> UserProfile:
        with self.db.session() as s:
            try:
                return self._shown(s, [users.get_profile(s, name)])[0]
            except NoUserError:
                raise UnknownUserError(f"User {name} is not found.") from None

    def create_user(self, by: User, name: str, password: str, *, email: str = "", admin: bool = False,
                    virtual_clusters: Sequence[str] = (), extension: dict[str, Any] | None = None) -> User:
        require_admin(by)
        with self._changing() as s:
            vc_groups = _vc_groups(s, virtual_clusters)
            return users.create_user(s, name, password, admin, groups=vc_groups, email=email, extension=extension,
                                     now=self.clock())

    def update_user(self, by: User, name: str, changes: UserChanges) -> None:
        """An admin's ``PUT /api/v2/users``: any field; a new password revokes the user's login tokens."""
        require_admin(by)
        with self._changing() as s:
            self._apply(s, name, changes)

    def update_self(self, by: User, changes: UserChanges) -> None:
        """``PUT /api/v2/users/me``: e-mail, extension, and a new password given with the current one."""
        with self._changing() as s:
            if changes.password is not None:
                _check_old_password(s, by.name, changes.old_password)
            self._apply(s, by.name, replace(changes, virtual_clusters=None, admin=None))

    def _apply(self, s: Session, name: str, c: UserChanges) -> None:
        profile = users.get_profile(s, name)
        if c.email is not None:
            users.set_email(s, name, c.email)
        if c.virtual_clusters is not None:
            _set_virtual_clusters(s, profile.user, c.virtual_clusters)
        if c.admin is not None:
            users.set_admin(s, name, c.admin)
        if c.extension is not None:
            users.merge_extension(s, name, c.extension)
        if c.password is not None:
            users.set_password(s, name, c.password)
            tokens.revoke_user_tokens(s, name, application=False)  # as OpenPAI: logins end, programs go on

    def set_password(self, by: User, name: str, new: str, old: str | None) -> None:
        """An admin sets anyone's; a user sets their own with the current one. Login tokens are revoked."""
        with self._changing() as s:
            users.get_profile(s, name)
            if not by.admin:
                if by.name != name:
                    raise ForbiddenUserError(f"User {by.name} may not change the password of user {name}.")
                _check_old_password(s, name, old)
            self._apply(s, name, UserChanges(password=new))

    def set_email(self, by: User, name: str, email: str) -> None:
        _require_self_or_admin(by, name)
        with self._changing() as s:
            self._apply(s, name, UserChanges(email=email))

    def merge_extension(self, by: User, name: str, extension: dict[str, Any]) -> None:
        _require_self_or_admin(by, name)
        with self._changing() as s:
            self._apply(s, name, UserChanges(extension=extension))

    def set_admin(self, by: User, name: str, admin: bool) -> None:
        require_admin(by)
        with self._changing() as s:
            self._apply(s, name, UserChanges(admin=admin))

    def set_virtual_clusters(self, by: User, name: str, vcs: Sequence[str]) -> None:
        """OpenPAI's legacy call: the user's VC groups become those of ``vcs``; an admin's cannot be changed."""
        require_admin(by)
        with self._changing() as s:
            if users.get_profile(s, name).user.admin:
                raise ForbiddenUserError("Admin's virtual clusters cannot be updated.")
            self._apply(s, name, UserChanges(virtual_clusters=tuple(vcs)))

    def set_group_list(self, by: User, name: str, names: Sequence[str]) -> None:
        require_admin(by)
        with self._changing() as s:
            users.get_profile(s, name)
            users.set_groups(s, name, names)

    def add_to_group(self, by: User, name: str, group: str) -> None:
        require_admin(by)
        with self._changing() as s:
            groups.get_group(s, group)
            user = users.get_profile(s, name).user
            users.set_groups(s, name, [*user.groups, group])

    def remove_from_group(self, by: User, name: str, group: str) -> None:
        require_admin(by)
        with self._changing() as s:
            user = users.get_profile(s, name).user
            users.set_groups(s, name, [g for g in user.groups if g != group])

    def delete_user(self, by: User, name: str) -> None:
        require_admin(by)
        with self._changing() as s:
            if users.get_profile(s, name).user.admin:
                raise RemoveAdminError(f"Admin {name} is not allowed to remove.")
            users.delete_user(s, name)

    # ---- groups ---------------------------------------------------------------------------------

    def groups(self) -> list[Group]:
        with self.db.session() as s:
            return groups.list_groups(s)

    def group(self, name: str) -> Group:
        with self.db.session() as s:
            try:
                return groups.get_group(s, name)
            except NoGroupError:
                raise UnknownGroupError(f"Group {name} is not found.") from None

    def members(self, by: User, name: str) -> list[User]:
        """The group's users (OpenPAI's user list of a group; admins only)."""
        require_admin(by)
        with self.db.session() as s:
            groups.get_group(s, name)
            return [u for u in (users.get_user(s, n) for n in groups.members(s, name)) if u is not None]

    def create_group(self, by: User, group: Group) -> Group:
        require_admin(by)
        with self._changing() as s:
            return groups.create_group(s, group, now=self.clock())

    def update_group(self, by: User, name: str, change: Callable[[Group], Group]) -> Group:
        """Apply ``change`` to the group (UnknownGroupError when there is none, as OpenPAI's update answers)."""
        require_admin(by)
        with self._changing() as s:
            found = groups.find_group(s, name)
            if found is None:
                raise UnknownGroupError(f"Group {name} is not found.")
            return groups.save_group(s, change(found))

    def delete_group(self, by: User, name: str) -> None:
        require_admin(by)
        if name in BUILT_IN:
            raise ForbiddenUserError(f"Group {name} is built in ({DEFAULT_GROUP}: every user; {ADMIN_GROUP}: the "
                                     "admins) and cannot be removed.")
        with self._changing() as s:
            groups.delete_group(s, name)


def _check_old_password(s: Session, name: str, old: str | None) -> None:
    if old is None or users.verify_password(s, name, old) is None:
        raise ForbiddenUserError("oldPassword: is not the user's current password.")


def _vc_groups(s: Session, vcs: Sequence[str]) -> list[str]:
    """The groups that grant ``vcs`` (each VC's own group, as OpenPAI: NoVirtualClusterError when a VC has none)."""
    known = {g.name for g in groups.list_groups(s, vcs) if g.is_vc_group}
    missing = [v for v in vcs if v not in known]
    if missing:
        raise NoVirtualClusterError(f"virtualCluster: no virtual cluster {', '.join(missing)}",
                                    field="virtualCluster")
    return list(dict.fromkeys(vcs))


def _set_virtual_clusters(s: Session, user: User, vcs: Sequence[str]) -> None:
    """The user's VC groups become those of ``vcs`` (``default`` always stays); other groups are kept."""
    wanted = _vc_groups(s, vcs)
    vc_groups = {g.name for g in groups.list_groups(s, user.groups) if g.is_vc_group and g.name != DEFAULT_GROUP}
    kept = [g for g in user.groups if g not in vc_groups]
    users.set_groups(s, user.name, list(dict.fromkeys([DEFAULT_GROUP, *kept, *wanted])))
