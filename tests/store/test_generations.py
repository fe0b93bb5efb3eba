"""Generations (``pai.store.generations``): counters moved by a committed write only, read in one statement."""

from __future__ import annotations

import pytest

from pai.store import generations
from pai.store.db import Database
from tests.dbkit import statements_of


def test_the_migration_makes_both_counters_at_zero(empty_db: Database) -> None:
    empty_db.migrate()
    with empty_db.session() as s:
        assert generations.read(s) == {"accounts": 0, "cluster": 0}


def test_a_bump_moves_its_counters_once_committed_and_a_rolled_back_one_moves_nothing(db: Database) -> None:
    with db.session() as s:  # the db fixture empties every table: a counter without its row reads 0
        assert generations.read(s) == {} and generations.value(s, "accounts") == 0
        generations.bump(s, "accounts")
        generations.bump(s, "accounts", "cluster")
    with db.session() as s:
        assert generations.read(s) == {"accounts": 2, "cluster": 1}
    with pytest.raises(RuntimeError), db.session() as s:
        generations.bump(s, "cluster")
        assert generations.value(s, "cluster") == 2  # its own transaction sees it
        raise RuntimeError("the write fails")
    with db.session() as s:
        assert generations.read(s) == {"accounts": 2, "cluster": 1}
        assert generations.value(s, "cluster") == 1


def test_reading_every_counter_is_one_statement(db: Database) -> None:
    with db.session() as s:
        generations.bump(s, "accounts", "cluster")
    with db.session() as s, statements_of(db.engine) as statements:
        generations.read(s)
    assert len([st for st in statements if "generations" in st]) == 1


def test_an_unknown_name_is_refused(db: Database) -> None:
    with pytest.raises(ValueError, match="nope"), db.session() as s:
        generations.bump(s, "nope")
