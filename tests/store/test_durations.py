"""Typical run times (pai.store.durations) on both backends: the median of a user's last 20 successful jobs in a VC,
none below 3, other users, VCs and states left out; many pairs in one query per chunk; the index it reads."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from pai.domain.job import Job
from pai.domain.states import JobState
from pai.store import durations, jobs, migrations
from pai.store.db import Database
from tests.dbkit import statements_of
from tests.store.conftest import Kind, make_database

from .builders import job

OK, FAILED, STOPPED, RUNNING = JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED, JobState.RUNNING
INDEX = "ix_jobs_user_name_vc_state_completed_at_started_at"


@dataclass(frozen=True)
class Ran:
    """A finished job: who ran it where, how it ended, how long it ran and when it ended."""

    seconds: float | None
    ended: float = 0.0
    user: str = "alice"
    vc: str = "dev"
    state: JobState = OK


_made = 0


def _job(r: Ran) -> Job:
    global _made
    _made += 1
    value = job(f"run-{_made}", r.user, virtual_cluster=r.vc, state=r.state)
    started = None if r.seconds is None else 10_000.0 + r.ended - r.seconds
    return replace(value, started_at=started, completed_at=None if r.state is RUNNING else 10_000.0 + r.ended)


def _insert(db: Database, runs: list[Ran]) -> None:
    with db.session() as s:
        for r in runs:
            jobs.insert_job(s, _job(r), "{}")


ALICE_DEV = ("alice", "dev")


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        pytest.param([Ran(100), Ran(300), Ran(200)], {ALICE_DEV: 200.0}, id="three: their median"),
        pytest.param([Ran(100), Ran(400), Ran(200), Ran(300)], {ALICE_DEV: 250.0}, id="an even count: mid-way"),
        pytest.param([Ran(100), Ran(300)], {}, id="two: none"),
        pytest.param([], {}, id="no job: none"),
        pytest.param([Ran(60, ended=100 + k) for k in range(20)] + [Ran(9_000, ended=k) for k in range(25)],
                     {ALICE_DEV: 60.0}, id="the last 20 by completion, not by insertion"),
        pytest.param([Ran(60, ended=k) for k in range(11)] + [Ran(9_000, ended=100 + k) for k in range(10)],
                     {ALICE_DEV: 4_530.0}, id="the last 20: the oldest of 21 drops out"),
        pytest.param([Ran(100), Ran(200), Ran(5, user="bob"), Ran(5, user="bob"), Ran(5, vc="prod"),
                      Ran(5, vc="prod"), Ran(5, state=FAILED), Ran(5, state=STOPPED), Ran(5, state=RUNNING)], {},
                     id="other users, VCs and states do not count"),
        pytest.param([Ran(100), Ran(200), Ran(300), Ran(None), Ran(None)], {ALICE_DEV: 200.0},
                     id="a job with no start time does not count"),
        pytest.param([Ran(100), Ran(200), Ran(300), Ran(7, user="bob", vc="prod"), Ran(8, user="bob", vc="prod"),
                      Ran(9, user="bob", vc="prod"), Ran(1, user="carol"), Ran(1, user="carol")],
                     {ALICE_DEV: 200.0, ("bob", "prod"): 8.0}, id="several pairs at once"),
    ],
)
def test_typical_run_seconds(db: Database, runs: list[Ran], expected: dict[tuple[str, str], float]) -> None:
    _insert(db, runs)
    asked = [ALICE_DEV, ("bob", "prod"), ("carol", "dev"), ("nobody", "dev")]
    with db.session() as s:
        assert durations.typical_run_seconds(s, asked) == expected


def test_many_pairs_take_one_query_per_chunk(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    users = [f"u{k}" for k in range(5)]
    _insert(db, [Ran(10 * (k + 1) + j, user=u, ended=j) for k, u in enumerate(users) for j in range(3)])
    monkeypatch.setattr(durations, "CHUNK", 2)
    with statements_of(db.engine) as statements, db.session() as s:
        got = durations.typical_run_seconds(s, [(u, "dev") for u in users] * 2)  # (asked twice: once each)
    assert got == {(u, "dev"): 10.0 * (k + 1) + 1 for k, u in enumerate(users)}
    assert len([q for q in statements if q.lstrip().upper().startswith("SELECT")]) == 3


def test_no_pair_no_query(db: Database) -> None:
    with statements_of(db.engine) as statements, db.session() as s:
        assert durations.typical_run_seconds(s, []) == {}
    assert not [q for q in statements if q.lstrip().upper().startswith("SELECT")]


def _plan(db: Database, sql: str) -> str:
    with db.session() as s:
        if db.dialect == "sqlite":
            return "\n".join(str(row[-1]) for row in s.execute(text(f"EXPLAIN QUERY PLAN {sql}")))
        s.execute(text("SET LOCAL enable_seqscan = off"))
        s.execute(text("SET LOCAL enable_sort = off"))
        return "\n".join(str(row[0]) for row in s.execute(text(f"EXPLAIN {sql}")))


@pytest.mark.parametrize("pairs", [1, 3], ids=["one pair", "three pairs"])
def test_each_pair_is_a_range_of_the_index_in_its_order(db: Database, pairs: int) -> None:
    _insert(db, [Ran(100, user=f"u{k}", ended=j) for k in range(pairs) for j in range(4)])
    query = durations._query([(f"u{k}", "dev") for k in range(pairs)], durations.LAST)
    plan = _plan(db, str(query.compile(db.engine, compile_kwargs={"literal_binds": True})))
    scans = [line for line in plan.splitlines() if INDEX in line]
    assert len(scans) == pairs, plan
    assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan  # the index gives the order
    if db.dialect == "sqlite":  # the run times come from the index: no table row is read
        assert all("COVERING INDEX" in line for line in scans), plan


def test_migration_0013_adds_the_index_and_takes_it_back(kind: Kind, tmp_path: Path) -> None:
    def indexes(db: Database) -> set[str]:
        return {str(ix["name"]) for ix in inspect(db.engine).get_indexes("jobs")}

    with make_database(kind, tmp_path, migrate=False) as db:
        with db.engine.begin() as c:
            migrations.upgrade(c, "0012")
        assert INDEX not in indexes(db)
        with db.engine.begin() as c:
            migrations.upgrade(c)
        assert INDEX in indexes(db)
        with db.engine.begin() as c:
            migrations.downgrade(c, "0012")
        assert INDEX not in indexes(db)
