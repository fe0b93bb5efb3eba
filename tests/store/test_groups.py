"""Groups, memberships and what they grant a user; the migration that brought groups keeps everyone's access."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from pai.domain.errors import ConflictGroupError, NoGroupError
from pai.domain.groups import Group, vc_group
from pai.store import groups, migrations, users
from pai.store.db import Database
from tests.store.conftest import Kind, make_database

ADMINS = Group("ops", extension={"acls": {"admin": True}})
TEAM = Group("team", extension={"acls": {"virtualClusters": ["dev", "prod"], "storageConfigs": ["nfs"]}})


def test_rights_come_from_the_groups(db: Database) -> None:
    with db.session() as s:
        for g in (TEAM, ADMINS, vc_group("dev")):
            groups.create_group(s, g)
        users.create_user(s, "alice", "pw-123", groups=["team"])
        users.create_user(s, "bob", "pw-123", groups=["dev"])
        users.create_user(s, "carol", "pw-123", groups=["ops"])
    with db.session() as s:
        alice, bob, carol = (users.get_user(s, n) for n in ("alice", "bob", "carol"))
    assert alice is not None and bob is not None and carol is not None
    assert (alice.admin, alice.groups, alice.virtual_clusters, alice.storages) == (
        False, ("default", "team"), frozenset({"default", "dev", "prod"}), frozenset({"nfs"}))
    assert (bob.virtual_clusters, bob.may_use_vc("dev"), bob.may_use_vc("prod")) == (
        frozenset({"default", "dev"}), True, False)
    assert carol.admin and carol.may_use_vc("anything")


def test_a_change_to_a_group_changes_its_members_rights(db: Database) -> None:
    with db.session() as s:
        groups.create_group(s, TEAM)
        users.create_user(s, "alice", "pw-123", groups=["team"])
    with db.session() as s:
        groups.save_group(s, TEAM.not_granting("prod"))
    with db.session() as s:
        alice = users.get_user(s, "alice")
    assert alice is not None and not alice.may_use_vc("prod") and alice.may_use_vc("dev")


def test_deleting_a_group_removes_its_memberships(db: Database) -> None:
    with db.session() as s:
        groups.create_group(s, TEAM)
        users.create_user(s, "alice", "pw-123", groups=["team"])
        groups.delete_group(s, "team")
    with db.session() as s:
        alice = users.get_user(s, "alice")
        assert alice is not None and alice.groups == ("default",)
        assert s.execute(text("SELECT count(*) FROM memberships WHERE group_name = 'team'")).scalar() == 0
        with pytest.raises(NoGroupError):
            groups.delete_group(s, "team")


def test_group_names_are_unique_and_members_must_name_groups(db: Database) -> None:
    with db.session() as s:
        groups.create_group(s, TEAM)
        with pytest.raises(ConflictGroupError, match="team"):
            groups.create_group(s, TEAM)
        with pytest.raises(NoGroupError, match="ghost"):
            users.create_user(s, "alice", "pw-123", groups=["ghost"])
        assert users.get_user(s, "alice") is None


@pytest.mark.parametrize(
    ("start", "admin", "left"),
    [
        pytest.param(("default", "admingroup"), False, ("default",), id="demote: leaves admingroup"),
        pytest.param(("default", "ops", "team"), False, ("default", "team"), id="demote: leaves every granting group"),
        pytest.param(("default", "team"), True, ("default", "team", "admingroup"), id="promote: joins admingroup"),
        pytest.param(("default", "ops"), True, ("default", "ops"), id="promote an admin: unchanged"),
    ],
)
def test_set_admin_moves_between_groups(db: Database, start: tuple[str, ...], admin: bool,
                                        left: tuple[str, ...]) -> None:
    with db.session() as s:
        groups.create_group(s, ADMINS)
        groups.create_group(s, TEAM)
        users.create_user(s, "alice", "pw-123", groups=[g for g in start if g != "default"])
        assert users.set_admin(s, "alice", admin).groups == left


def test_has_admin(db: Database) -> None:
    with db.session() as s:
        assert not users.has_admin(s)
        users.create_user(s, "alice", "pw-123")
        assert not users.has_admin(s)
        users.create_user(s, "root", "pw-123", admin=True)
        assert users.has_admin(s)


def test_profile_keeps_email_and_extension(db: Database) -> None:
    with db.session() as s:
        users.create_user(s, "alice", "pw-123", email="a@example.com", extension={"k": 1})
        users.merge_extension(s, "alice", {"j": 2})
    with db.session() as s:
        p = users.get_profile(s, "alice")
    assert (p.email, p.extension) == ("a@example.com", {"k": 1, "j": 2})


def test_upgrade_keeps_everyones_access(kind: Kind, tmp_path: Path) -> None:
    """Revision 0010 brings groups: admins stay admins and everyone may still use every VC they could."""
    with make_database(kind, tmp_path, migrate=False) as db:
        with db.engine.begin() as c:
            migrations.upgrade(c, "0009")
            c.execute(text("INSERT INTO users (name, password_hash, admin, created_at) VALUES "
                           "('root', 'h', TRUE, 0), ('alice', 'h', FALSE, 0)"))
            for i, vc in enumerate(("default", "dev")):
                c.execute(text("INSERT INTO virtual_clusters (name, position, spec, status, updated_at) "
                               "VALUES (:n, :p, '{}', 'running', 0)"), {"n": vc, "p": i})
            c.execute(text("INSERT INTO tokens (token_hash, user_id, expires_at, created_at, application) "
                           "SELECT 'digest', id, NULL, 0, FALSE FROM users WHERE name = 'alice'"))
        with db.engine.begin() as c:
            migrations.upgrade(c)
        with db.session() as s:
            root, alice = users.get_user(s, "root"), users.get_user(s, "alice")
            assert root is not None and root.admin and root.groups == ("default", "admingroup", "dev")
            assert alice is not None and not alice.admin and alice.virtual_clusters == {"default", "dev"}
            assert s.execute(text("SELECT count(*) FROM tokens")).scalar() == 1  # nothing cascaded away
            assert groups.get_group(s, "dev").is_vc_group
