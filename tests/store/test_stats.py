"""VC usage samples (stored, read a VC at a time, pruned), job counts by state, and migration 0012."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import inspect, text

from pai.domain.resources import Resources
from pai.domain.states import JobState
from pai.store import jobs as store_jobs
from pai.store import migrations, stats
from pai.store.db import Database
from pai.store.stats import VcUsageSample
from tests.dbkit import statements_of
from tests.store.builders import job
from tests.store.conftest import Kind, make_database


def sample(vc: str, at: float, gpu: int = 1) -> VcUsageSample:
    return VcUsageSample(vc, at, Resources(gpu, 2 * gpu, 1024 * gpu), Resources(4, 8, 8192), Resources(8, 16, 16384),
                         running_jobs=gpu, waiting_jobs=3)


def test_samples_are_read_back_by_vc_and_time_and_old_ones_pruned(db: Database) -> None:
    with db.session() as s:
        stats.add_samples(s, [sample("dev", 100.0, 1), sample("prod", 100.0, 5), sample("dev", 160.0, 2),
                              sample("dev", 220.0, 3)])
    with db.session() as s:
        assert stats.samples_of(s, "dev", 0.0) == [sample("dev", 100.0, 1), sample("dev", 160.0, 2),
                                                   sample("dev", 220.0, 3)]
        assert [x.at for x in stats.samples_of(s, "dev", 160.0)] == [160.0, 220.0]
        assert stats.samples_of(s, "prod", 0.0) == [sample("prod", 100.0, 5)]
        assert stats.samples_of(s, "nope", 0.0) == []
        stats.prune_samples(s, 160.0)
    with db.session() as s:
        assert [x.at for x in stats.samples_of(s, "dev", 0.0)] == [160.0, 220.0]
        assert stats.samples_of(s, "prod", 0.0) == []


def test_jobs_are_counted_by_state_in_one_grouped_query(db: Database) -> None:
    states = [JobState.WAITING, JobState.RUNNING, JobState.RUNNING, JobState.FAILED, JobState.SUCCEEDED]
    with db.session() as s:
        for i, state in enumerate(states):
            store_jobs.insert_job(s, job(f"j{i}", "alice" if i % 2 else "bob", state=state), "{}")
    with db.session() as s, statements_of(db.engine) as statements:
        everyone = stats.count_by_state(s)
        bobs = stats.count_by_state(s, ("bob",))
    assert everyone == {JobState.WAITING: 1, JobState.RUNNING: 2, JobState.STOPPING: 0, JobState.STOPPED: 0,
                        JobState.SUCCEEDED: 1, JobState.FAILED: 1}
    assert bobs == {**dict.fromkeys(JobState, 0), JobState.WAITING: 1, JobState.RUNNING: 1, JobState.SUCCEEDED: 1}
    queries = [q for q in statements if q.startswith("SELECT")]
    assert len(queries) == 2 and all("GROUP BY jobs.state" in q for q in queries)


def test_the_plan_of_the_count_reads_an_index_not_the_rows(tmp_path: Path) -> None:
    with make_database("sqlite", tmp_path) as db, db.engine.connect() as c:
        plan = " ".join(str(row[-1]) for row in c.exec_driver_sql(
            "EXPLAIN QUERY PLAN SELECT state, count(*) FROM jobs GROUP BY state"))
        assert "COVERING INDEX" in plan, plan


def test_migration_0012_adds_the_samples_table_and_takes_it_back(kind: Kind, tmp_path: Path) -> None:
    with make_database(kind, tmp_path, migrate=False) as db:
        with db.engine.begin() as c:
            migrations.upgrade(c, "0011")
        assert "vc_usage_samples" not in inspect(db.engine).get_table_names()
        with db.engine.begin() as c:
            migrations.upgrade(c)
        with db.session() as s:
            stats.add_samples(s, [sample("default", 1.0)])
        indexes = {tuple(ix["column_names"]) for ix in inspect(db.engine).get_indexes("vc_usage_samples")}
        assert ("at",) in indexes
        with db.engine.begin() as c:
            migrations.downgrade(c, "0011")
            assert c.execute(text("SELECT count(*) FROM jobs")).scalar() == 0
        assert "vc_usage_samples" not in inspect(db.engine).get_table_names()
