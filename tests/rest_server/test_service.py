"""The service facade: a request is one operation in one transaction, the caller checked inside it; a refused caller
runs nothing; a failed operation changes nothing; writes run on the writer thread, and those the launcher acts on
wake it."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import event, text

from pai.domain.errors import ForbiddenUserError, UnauthorizedUserError
from pai.launcher.service import Launcher
from pai.launcher.storethread import StoreThread
from pai.launcher.vcadmin import VcAdmin
from pai.rest_server.service import Context, Credentials, Service, anonymous, reads, writes
from pai.store.db import Database
from tests.dbkit import statements_of
from tests.store.conftest import TEST_KEYRING

INSERT = text("INSERT INTO cluster_settings (key, value) VALUES (:key, '1')")
ran: list[tuple[str, str, str | None]] = []  # (op, thread, caller)


@reads
def who(c: Context) -> str:
    ran.append(("who", threading.current_thread().name, c.user.name))
    return c.user.name


@writes(wakes=True)
def store_then_fail(c: Context, key: str) -> None:
    ran.append(("store_then_fail", threading.current_thread().name, c.user.name))
    with c.db.session() as s:
        s.execute(INSERT, {"key": key})
    raise ValueError("after the write")


@writes(person=True, wakes=True)
def store(c: Context, key: str) -> None:
    ran.append(("store", threading.current_thread().name, c.user.name))
    with c.db.session() as s:
        s.execute(INSERT, {"key": key})


@writes()
def quiet(c: Context, key: str) -> None:  # a write the launcher does not act on (a tag, a user): no wake-up
    with c.db.session() as s:
        s.execute(INSERT, {"key": key})


@anonymous(writes=False)
def nobody(c: Context) -> str | None:
    return None if c.caller is None else c.caller.user.name


def stored(db: Database) -> list[str]:
    with db.session() as s:
        return list(s.execute(text("SELECT key FROM cluster_settings ORDER BY key")).scalars())


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[tuple[Service, Launcher, list[int]]]:
    db = Database(f"sqlite:///{tmp_path / 'pai.db'}", TEST_KEYRING)
    db.migrate()
    launcher = Launcher(db)
    launcher.accounts.ensure_admin("admin", "pw")
    store = StoreThread()
    woken: list[int] = []
    ran.clear()
    yield Service(launcher, VcAdmin(db, launcher.clock, launcher.clusters, launcher.accounts), store,
                  wake=lambda: woken.append(1)), launcher, woken
    store.close()
    db.dispose()


async def test_reads_run_on_a_reader_and_writes_on_the_writer_those_it_acts_on_wake_the_launcher(
        service: tuple[Service, Launcher, list[int]]) -> None:
    svc, launcher, woken = service
    token, _ = launcher.accounts.login("admin", "pw", 60)
    assert await svc(Credentials(token), who) == "admin" and woken == []
    await svc(Credentials(token), store, "k")
    assert [(op, thread.split("_")[0]) for op, thread, _ in ran] == [("who", "pai-read"), ("store", "pai-store")]
    assert woken == [1] and stored(launcher.db) == ["k"]
    await svc(Credentials(token), quiet, "q")
    assert woken == [1] and stored(launcher.db) == ["k", "q"]


async def test_a_failed_operation_changes_nothing(service: tuple[Service, Launcher, list[int]]) -> None:
    svc, launcher, woken = service
    token, _ = launcher.accounts.login("admin", "pw", 60)
    with pytest.raises(ValueError, match="after the write"):
        await svc(Credentials(token), store_then_fail, "k")  # (it would wake the launcher if it succeeded)
    assert stored(launcher.db) == [] and woken == []


@pytest.mark.parametrize("case", ["no credentials", "unknown token", "revoked", "basic with a login token",
                                  "an application where a person is needed"])
async def test_a_refused_caller_runs_nothing(service: tuple[Service, Launcher, list[int]], case: str) -> None:
    svc, launcher, _ = service
    token, _ = launcher.accounts.login("admin", "pw", 60)
    caller = launcher.accounts.caller_of(token)
    assert caller is not None
    creds = {"no credentials": None, "unknown token": Credentials("nope"), "revoked": Credentials(token),
             "basic with a login token": Credentials(token, "admin"),
             "an application where a person is needed": Credentials(launcher.accounts.application_token(caller))}[case]
    if case == "revoked":
        launcher.accounts.revoke(caller, token)
    expected = ForbiddenUserError if case.startswith("an application") else UnauthorizedUserError
    with pytest.raises(expected):
        await svc(creds, store, "k")
    assert ran == [] and stored(launcher.db) == []


async def test_an_anonymous_operation_has_no_caller(service: tuple[Service, Launcher, list[int]]) -> None:
    svc, _, _ = service
    assert await svc(None, nobody) is None


async def test_a_read_is_one_transaction_of_its_statements_and_the_callers_check(
        service: tuple[Service, Launcher, list[int]]) -> None:
    """What every request pays: the generation of the accounts (the token's rows only when not cached at it), then the
    operation's statements; no SAVEPOINT round trips."""
    svc, launcher, _ = service
    token, _ = launcher.accounts.login("admin", "pw", 60)
    assert await svc(Credentials(token), who) == "admin"  # cached now
    transactions: list[object] = []
    began = transactions.append  # one bound method: the same to listen and to remove
    event.listen(launcher.db.engine, "begin", began)  # (SQLite's BEGIN goes to the driver: no statement)
    try:
        with statements_of(launcher.db.engine) as statements:
            assert await svc(Credentials(token), who) == "admin"
    finally:
        event.remove(launcher.db.engine, "begin", began)
    assert len(transactions) == 1
    assert [s.split()[0] for s in statements] == ["SELECT"] and "generations" in statements[0]
    launcher.accounts.revoke(launcher.accounts.caller_of(token) or pytest.fail("no caller"), token)
    with pytest.raises(UnauthorizedUserError):  # the generation moved: the token's rows are read again
        await svc(Credentials(token), who)
