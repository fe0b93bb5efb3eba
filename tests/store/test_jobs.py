"""Jobs: insert, get, conflicts, listing with filters and pages, active jobs, saving state changes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import text

from pai.domain.errors import ConflictJobError, NoJobError
from pai.domain.job import Job, Task
from pai.domain.states import JobState, TaskState
from pai.store import jobs, sealing
from pai.store.db import Database
from tests.dbkit import statements_of

from .builders import full_spec, job, role

W, R, S = JobState.WAITING, JobState.RUNNING, JobState.STOPPING


def insert(db: Database, *values: Job) -> None:
    with db.session() as s:
        for value in values:
            jobs.insert_job(s, value, f"config of {value.name}")


def count(db: Database, table: str) -> int:
    with db.session() as s:
        return int(s.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_insert_then_get_returns_the_same_job(db: Database) -> None:
    value = replace(job("full", roles=full_spec().task_roles), waiting_reason={"text": "VC dev at max", "gpu": [8, 8]})
    insert(db, value)
    with db.session() as s:
        for got in (jobs.get_job(s, "alice~full"), jobs.get_job_by_id(s, value.id)):
            assert got.spec.sealed is not None  # a role has a registry login: read back sealed, equal once opened
            assert replace(got, spec=sealing.unsealed(s, got.spec)) == value
        assert jobs.get_config_text(s, "alice~full") == "config of full"
    assert count(db, "tasks") == 4 + 2


@pytest.mark.parametrize("key", ["alice~nope", "bob~job", "alice", "~job", "alice~"])
def test_unknown_key_is_no_job(db: Database, key: str) -> None:
    insert(db, job("job"))
    with db.session() as s:
        with pytest.raises(NoJobError, match=key):
            jobs.get_job(s, key)
        with pytest.raises(NoJobError):
            jobs.get_config_text(s, key)
        with pytest.raises(NoJobError):
            jobs.get_job_by_id(s, key)


def test_conflict_names_the_key_and_leaves_nothing_behind(db: Database) -> None:
    first = job("dup", roles=(role("w", 2),))
    insert(db, first)
    second = job("dup", roles=(role("w", 5), role("ps", 1)))
    with db.session() as s:
        with pytest.raises(ConflictJobError, match="alice~dup"):
            jobs.insert_job(s, second, "other text")
        jobs.insert_job(s, job("after-conflict"), "ok")  # the session is still usable
    with db.session() as s:
        assert jobs.get_job(s, "alice~dup") == first
        assert jobs.get_config_text(s, "alice~dup") == "config of dup"
        with pytest.raises(NoJobError):
            jobs.get_job_by_id(s, second.id)
        assert s.execute(text("SELECT count(*) FROM tasks WHERE job_id = :id"), {"id": second.id}).scalar() == 0
    assert count(db, "jobs") == 2
    assert count(db, "tasks") == 2 + 1


def test_same_name_for_another_user_is_fine(db: Database) -> None:
    insert(db, job("same", "alice"), job("same", "bob"))
    with db.session() as s:
        assert jobs.get_job(s, "bob~same").user == "bob"


@pytest.fixture
def catalogue(db: Database) -> Database:
    insert(
        db,
        job("train-a", "alice", submitted_at=1, virtual_cluster="dev", state=R),
        job("train_b", "alice", submitted_at=2, virtual_cluster="prod", state=JobState.SUCCEEDED),
        job("eval-TRAIN", "bob", submitted_at=3, virtual_cluster="dev", state=W),
        job("trainxb", "bob", submitted_at=4, virtual_cluster="default", state=JobState.FAILED),
        job("infer", "carol", submitted_at=5, virtual_cluster="dev", state=S),
    )
    return db


def test_active_jobs_oldest_first(catalogue: Database) -> None:
    with catalogue.session() as s:
        assert [j.name for j in jobs.active_jobs(s)] == ["train-a", "eval-TRAIN", "infer"]


def test_active_jobs_load_their_tasks_in_one_query(catalogue: Database) -> None:
    with statements_of(catalogue.engine) as statements, catalogue.session() as s:
        found = jobs.active_jobs(s)
    assert all(len(j.tasks) == 1 and j.tasks[0].role == "worker" for j in found)
    assert len([q for q in statements if "FROM tasks" in q]) == 1
    assert len(statements) <= 3  # (BEGIN,) jobs, tasks


def _placed(j: Job, *nodes: str) -> Job:
    """``j`` with its tasks placed on ``nodes`` in turn, each with an attempt."""
    tasks = tuple(replace(t, node=n, state=TaskState.RUNNING, attempt_id=f"{j.name}-{t.index}", address="10.0.0.1",
                          ports={"http": (8080,)}, gpus=(0,), started_at=5.0)
                  for t, n in zip(j.tasks, nodes, strict=True))
    return replace(j, tasks=tasks)


def test_tasks_on_are_the_active_jobs_task_rows_there_in_one_query(db: Database) -> None:
    """``active_jobs_on``'s jobs, in its order, as the rows of their tasks on the nodes: a few columns of each."""
    second = _placed(job("second", submitted_at=2, state=R, roles=(role("w", 2),)), "n1", "n2")
    first = _placed(job("first", submitted_at=1, state=S), "n2")
    ended = _placed(job("ended", submitted_at=0, state=JobState.SUCCEEDED), "n1")
    elsewhere = _placed(job("elsewhere", submitted_at=0, state=R), "n3")
    insert(db, second, first, ended, elsewhere)
    with db.session() as s, statements_of(db.engine) as statements:
        rows = jobs.tasks_on(s, ["n1", "n2"])
    assert len([q for q in statements if "FROM tasks" in q]) == 1
    with db.session() as s:
        assert [j.id for j in jobs.active_jobs_on(s, ["n1", "n2"])] == list(dict.fromkeys(i for i, _, _ in rows))
    assert [(i, st, t.role, t.index, t.node, t.attempt_id, t.state) for i, st, t in rows] == [
        (first.id, S, "worker", 0, "n2", "first-0", TaskState.RUNNING),
        (second.id, R, "w", 0, "n1", "second-0", TaskState.RUNNING),
        (second.id, R, "w", 1, "n2", "second-1", TaskState.RUNNING),
    ]
    # only what reconciling reads: the rest at its defaults
    assert {(t.address, t.gpus, t.started_at) for _, _, t in rows} == {(None, (), None)}
    with db.session() as s:
        assert jobs.tasks_on(s, []) == []


def test_save_job_updates_job_and_tasks(db: Database) -> None:
    value = job("run", roles=(role("w", 2), role("ps", 1)))
    insert(db, value)
    w0 = replace(
        value.task("w", 0),
        state=TaskState.RUNNING,
        node="n1",
        address="10.0.0.1",
        ports={"http": (20000,), "ssh": (20001,)},
        gpus=(0, 1),
        attempt_id="att-1",
        started_at=5.0,
    )
    ps0 = replace(value.task("ps", 0), state=TaskState.FAILED, exit_code=1, exit_reason="user error", retries=1)
    changed = replace(
        value.with_task(w0).with_task(ps0),
        state=R,
        started_at=5.0,
        retries=1,
        exit_code=None,
        waiting_reason=None,
    )
    with db.session() as s:
        jobs.save_job(s, changed)
    with db.session() as s:
        assert jobs.get_job(s, "alice~run") == changed
        found = jobs.active_jobs(s)
    assert found == [changed]


def test_save_job_adds_and_removes_task_rows(db: Database) -> None:
    value = job("elastic", roles=(role("w", 3),))
    insert(db, value)
    shrunk = replace(value, tasks=(value.tasks[0], value.tasks[2], Task("w", 7, retries=4)))
    with db.session() as s:
        jobs.save_job(s, shrunk)
    with db.session() as s:
        assert [(t.index, t.retries) for t in jobs.get_job(s, "alice~elastic").tasks] == [(0, 0), (2, 0), (7, 4)]
    assert count(db, "tasks") == 3


def test_save_unknown_job(db: Database) -> None:
    with db.session() as s, pytest.raises(NoJobError, match="alice~ghost"):
        jobs.save_job(s, job("ghost"))


def test_failed_session_keeps_nothing(db: Database) -> None:
    with pytest.raises(RuntimeError), db.session() as s:
        jobs.insert_job(s, job("doomed"), "x")
        raise RuntimeError("crash before commit")
    assert count(db, "jobs") == count(db, "tasks") == 0
