"""Caches shared through the database (``pai.store.generations``): two launchers on one database, each with its own
engine, stand for two processes (of one master or of two). A write through one is seen by the other's next lookup,
while the other's cache still answers when nothing changed. On a SQLite file and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pai.domain.errors import ForbiddenUserError, NoVirtualClusterError
from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.resources import Resources
from pai.launcher.service import Launcher
from pai.launcher.vcadmin import VcAdmin
from pai.store import generations
from pai.store.db import Database
from pai.store.records import User
from pai.store.vcs import VcStatus
from tests.dbkit import statements_of
from tests.store.conftest import KINDS, TEST_KEYRING, Kind, make_database

SPEC = JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "true", Resources(0, 1, 256)),), image="busybox",
               virtual_cluster="v1")


@pytest.fixture(params=[pytest.param(k, marks=[pytest.mark.postgres] if k == "postgresql" else []) for k in KINDS])
def two(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Launcher, Launcher]]:
    """Two launchers on one database, each with its own engine (its own connections), as two processes have."""
    kind: Kind = request.param
    with make_database(kind, tmp_path) as db:
        other = Database(db.url.render_as_string(hide_password=False), TEST_KEYRING)
        try:
            yield Launcher(db), Launcher(other)
        finally:
            other.dispose()


def _admin(launcher: Launcher) -> User:
    launcher.accounts.ensure_admin("admin", "pw")
    _, user = launcher.accounts.login("admin", "pw", 3600)
    return user


def _reads_of(launcher: Launcher, table: str, lookup: object) -> int:
    """How many statements naming ``table`` ``lookup`` (a call) ran on ``launcher``'s engine."""
    with statements_of(launcher.db.engine) as statements:
        assert callable(lookup)
        lookup()
    return sum(f" {table}" in s for s in statements)


def test_a_token_revoked_through_one_process_is_refused_by_the_other_on_its_next_lookup(
        two: tuple[Launcher, Launcher]) -> None:
    a, b = two
    _admin(a)
    token, _ = a.accounts.login("admin", "pw", 3600)
    kept, _ = a.accounts.login("admin", "pw", 3600)
    caller = b.accounts.caller_of(token)
    assert caller is not None and caller.user.name == "admin"
    assert _reads_of(b, "tokens", lambda: b.accounts.caller_of(token)) == 0  # nothing changed: b's cache answers
    assert a.accounts.revoke(caller, token)
    assert b.accounts.caller_of(token) is None  # b was told nothing in-process: the generation told it
    assert b.accounts.caller_of(kept) is not None


def test_an_admin_demoted_or_a_group_grant_removed_through_one_process_is_seen_by_the_other_at_once(
        two: tuple[Launcher, Launcher]) -> None:
    a, b = two
    admin = _admin(a)
    vcs = VcAdmin(a.db, a.clock, a.clusters, a.accounts)
    vcs.put({"name": "v1"})
    a.directory.create_user(admin, "bob", "pw", admin=True)
    bob_token, _ = a.accounts.login("bob", "pw", 3600)
    a.directory.create_user(admin, "carol", "pw", virtual_clusters=("v1",))
    carol_token, _ = a.accounts.login("carol", "pw", 3600)

    bob, carol = b.accounts.caller_of(bob_token), b.accounts.caller_of(carol_token)
    assert bob is not None and bob.user.admin
    assert carol is not None and carol.user.may_use_vc("v1")

    a.directory.set_admin(admin, "bob", False)
    bob = b.accounts.caller_of(bob_token)
    assert bob is not None and not bob.user.admin

    a.directory.update_group(admin, "v1", lambda g: g.not_granting("v1"))
    carol = b.accounts.caller_of(carol_token)
    assert carol is not None and not carol.user.may_use_vc("v1")


def test_a_user_cached_by_name_follows_changes_made_through_the_other_process(two: tuple[Launcher, Launcher]) -> None:
    """``Accounts.user`` (an experiment's owner, for each trial's job): cached until a change to users anywhere."""
    a, b = two
    admin = _admin(a)
    VcAdmin(a.db, a.clock, a.clusters, a.accounts).put({"name": "v1"})
    a.directory.create_user(admin, "carol", "pw", virtual_clusters=("v1",))

    def carol() -> User | None:
        with b.db.session() as s:
            return b.accounts.user(s, "carol")

    first = carol()
    assert first is not None and first.may_use_vc("v1") and not first.admin
    assert _reads_of(b, "memberships", carol) == 0  # nothing changed: b's cache answers
    a.directory.update_group(admin, "v1", lambda g: g.not_granting("v1"))
    again = carol()
    assert again is not None and not again.may_use_vc("v1")
    a.directory.set_admin(admin, "carol", True)
    again = carol()
    assert again is not None and again.admin
    a.directory.set_admin(admin, "carol", False)
    a.directory.delete_user(admin, "carol")
    assert carol() is None


def test_a_vc_removed_through_one_process_takes_its_grant_away_in_the_other(two: tuple[Launcher, Launcher]) -> None:
    a, b = two
    admin = _admin(a)
    vcs = VcAdmin(a.db, a.clock, a.clusters, a.accounts)
    vcs.put({"name": "v1"})
    a.directory.create_user(admin, "carol", "pw", virtual_clusters=("v1",))
    token, _ = a.accounts.login("carol", "pw", 3600)
    carol = b.accounts.caller_of(token)
    assert carol is not None and carol.user.may_use_vc("v1")
    vcs.delete("v1")  # its group goes: VcAdmin bumps the accounts' generation too
    carol = b.accounts.caller_of(token)
    assert carol is not None and not carol.user.may_use_vc("v1")


def test_a_configuration_change_through_one_process_is_seen_by_the_others_next_get(
        two: tuple[Launcher, Launcher]) -> None:
    a, b = two
    admin = _admin(a)
    vcs = VcAdmin(a.db, a.clock, a.clusters, a.accounts)
    with b.db.session() as s:
        before = b.clusters.get(s)
    assert before.vc_status("v1") is None
    assert _reads_of(b, "virtual_clusters", lambda: b.jobs_readable_by_all()) == 0  # cached while unchanged

    vcs.put({"name": "v1"})
    job = b.submit(admin, SPEC, "{}")  # b's submission sees the VC made through a
    assert b.stop(job.key, admin).job.state.value == "STOPPED"
    vcs.set_status("v1", VcStatus.STOPPED)
    with pytest.raises(Exception, match="accepts no new jobs"):
        b.submit(admin, SPEC, "{}")
    vcs.apply_file({"access": {"jobsReadableByAll": False}})
    assert b.jobs_readable_by_all() is False
    vcs.delete("v1")
    with pytest.raises(NoVirtualClusterError):
        b.submit(admin, SPEC, "{}")


def test_a_write_that_rolls_back_bumps_nothing_and_the_other_keeps_its_cache(two: tuple[Launcher, Launcher]) -> None:
    a, b = two
    admin = _admin(a)
    token, _ = a.accounts.login("admin", "pw", 3600)
    assert b.accounts.caller_of(token) is not None
    with a.db.session() as s:
        before = generations.read(s)
    with pytest.raises(ForbiddenUserError, match="no admin left"):
        a.directory.set_admin(admin, "admin", False)  # the last admin: refused, rolled back
    with pytest.raises(NoVirtualClusterError):
        VcAdmin(a.db, a.clock, a.clusters, a.accounts).delete("nope")
    with a.db.session() as s:
        assert generations.read(s) == before
    assert _reads_of(b, "tokens", lambda: b.accounts.caller_of(token)) == 0
