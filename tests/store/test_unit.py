"""A unit of work: every session a thread opens inside it is one transaction (a request's caller check and its
operation), each in a SAVEPOINT of its own (in a read-only unit: none, a read has nothing to undo), on both
backends."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from pai.store.db import Database
from tests.dbkit import statements_of

INSERT = text("INSERT INTO cluster_settings (key, value) VALUES (:key, '1')")
KEYS = text("SELECT key FROM cluster_settings ORDER BY key")


def keys(db: Database) -> list[str]:
    with db.session() as s:
        return list(s.execute(KEYS).scalars())


def test_sessions_in_a_unit_commit_with_it(db: Database) -> None:
    with db.unit() as unit:
        with db.session() as s:
            assert s is unit  # joined, not a transaction of its own
            s.execute(INSERT, {"key": "a"})
        with db.session() as s:
            s.execute(INSERT, {"key": "b"})
        seen: list[list[str]] = []
        other = threading.Thread(target=lambda: seen.append(keys(db)))  # another thread: its own transaction
        other.start()
        other.join()
        assert seen == [[]]  # nothing committed before the unit ends
    assert keys(db) == ["a", "b"]


def test_a_failed_session_in_a_unit_is_undone_alone(db: Database) -> None:
    with db.unit():
        with db.session() as s:
            s.execute(INSERT, {"key": "kept"})
        with pytest.raises(ValueError), db.session() as s:
            s.execute(INSERT, {"key": "undone"})
            raise ValueError("this block fails")
        with db.session() as s:  # the unit goes on
            s.execute(INSERT, {"key": "after"})
    assert keys(db) == ["after", "kept"]


def test_a_unit_that_raises_changes_nothing(db: Database) -> None:
    with pytest.raises(PermissionError), db.unit():
        with db.session() as s:
            s.execute(INSERT, {"key": "a"})
        raise PermissionError("the caller may not")
    assert keys(db) == []


def test_units_do_not_nest(db: Database) -> None:
    with db.unit(), pytest.raises(RuntimeError, match="already"), db.unit():
        pass
    with db.unit():  # the failed one left nothing behind
        pass


def test_sessions_in_a_read_only_unit_join_it_without_a_savepoint(db: Database) -> None:
    with statements_of(db.engine) as statements, db.unit(read_only=True) as unit:
        for _ in range(2):
            with db.session() as s:
                assert s is unit
                assert list(s.execute(KEYS).scalars()) == []
    assert [s for s in statements if "SAVEPOINT" in s] == []
    assert len([s for s in statements if s == KEYS.text]) == 2
    with statements_of(db.engine) as statements, db.unit(), db.session() as s:  # a unit that may write keeps them
        s.execute(KEYS)
    assert any(s.startswith("SAVEPOINT") for s in statements)


def test_a_read_only_unit_leaves_its_connection_transactional_for_the_next_unit(db: Database) -> None:
    for _ in range(3):  # the pool hands the same connection back (on PostgreSQL it read in autocommit)
        with db.unit(read_only=True), db.session() as s:
            assert list(s.execute(KEYS).scalars()) == []
        with pytest.raises(PermissionError), db.unit():
            with db.session() as s:
                s.execute(INSERT, {"key": "a"})
            raise PermissionError("the caller may not")
        assert keys(db) == []
