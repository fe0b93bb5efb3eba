"""The leader's liveness lock on real PostgreSQL: one session holds it; it goes the moment that session ends, and
clusters in other schemas of the same database have locks of their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from pai.store.db import Database
from pai.store.liveness import Liveness

from .conftest import make_database

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[Database]:
    with make_database("postgresql", tmp_path / "a") as db:
        yield db


def test_one_session_holds_it_until_it_lets_go(pg: Database) -> None:
    leader, standby = Liveness(pg.conninfo()), Liveness(pg.conninfo())
    try:
        assert leader.try_hold() and leader.try_hold()  # held, and asking again changes nothing
        assert not standby.try_hold()
        leader.release()
        assert standby.try_hold() and not leader.try_hold()
    finally:
        leader.close()
        standby.close()


def test_it_goes_with_its_session(pg: Database) -> None:
    """A leader killed: PostgreSQL ends its session, and its lock with it (here, the backend is terminated)."""
    leader, standby = Liveness(pg.conninfo()), Liveness(pg.conninfo())
    try:
        assert leader.try_hold()
        assert leader._conn is not None
        pid = leader._conn.info.backend_pid
        with pg.engine.connect() as c:
            assert c.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
        assert standby.try_hold()  # the moment the session is gone
        assert not leader.try_hold()  # its connection is gone: it does not hold it, and it cannot take it
        assert not leader.held
    finally:
        leader.close()
        standby.close()


def test_another_schema_has_its_own(pg: Database, tmp_path: Path) -> None:
    with make_database("postgresql", tmp_path / "b") as other:
        here, there = Liveness(pg.conninfo()), Liveness(other.conninfo())
        try:
            assert here.try_hold() and there.try_hold()
        finally:
            here.close()
            there.close()
