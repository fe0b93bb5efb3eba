"""Job tags, job deletion (what goes with a job), and migration 0011 over a database with jobs in it."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import text

from pai.domain.states import TaskState
from pai.store import codec, history, keyword, migrations, tags
from pai.store import jobs as store_jobs
from pai.store.db import Database
from pai.store.records import TaskAttempt
from tests.store.builders import job
from tests.store.conftest import Kind, make_database


def test_a_tag_is_added_once_and_removed_once(db: Database) -> None:
    j = job("tagged")
    with db.session() as s:
        store_jobs.insert_job(s, j, "{}")
        assert [tags.add_tag(s, j.id, t) for t in ("b", "a", "b")] == [True, True, False]
    with db.session() as s:
        assert tags.tags_of(s, j.id) == ["a", "b"]
        assert [tags.remove_tag(s, j.id, t) for t in ("a", "a", "zzz")] == [True, False, False]
        assert tags.tags_of(s, j.id) == ["b"]


def test_deleting_a_job_takes_its_history_tags_and_index_entry(db: Database) -> None:
    gone, kept = job("train-gone"), job("train-kept", submitted_at=2000.0)
    with db.session() as s:
        for j in (gone, kept):
            store_jobs.insert_job(s, j, "{}")
            tags.add_tag(s, j.id, "t")
            history.add_event(s, j.id, 1.0, "submitted", "submitted")
            history.record_attempt(s, TaskAttempt(f"a-{j.name}", j.id, 0, "worker", 0, state=TaskState.RUNNING))
    with db.session() as s:
        store_jobs.delete_job(s, gone.id)
    with db.session() as s:
        for table in ("jobs", "tasks", "task_attempts", "job_events", "job_tags"):
            assert s.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 1, table
        assert keyword.count(s, "train") == 1  # the index lost the deleted name, kept the other
        assert store_jobs.get_job(s, kept.key).name == "train-kept"
        store_jobs.insert_job(s, job("train-gone"), "{}")  # the name is free again, and indexed
        assert keyword.count(s, "gone") == 1


def test_upgrade_to_0011_keeps_jobs_their_tasks_and_the_keyword_index(kind: Kind, tmp_path: Path) -> None:
    j = job("old-train")
    with make_database(kind, tmp_path, migrate=False) as db:
        with db.engine.begin() as c:
            migrations.upgrade(c, "0010")
            c.execute(text("INSERT INTO jobs (id, user_name, name, vc, state, priority, protocol_version, config_text, "
                           "spec, submitted_at, retries) VALUES (:id, 'alice', :name, 'default', 'SUCCEEDED', 10, 2, "
                           "'{}', :spec, 1, 2)"),
                      {"id": j.id, "name": j.name, "spec": json.dumps(codec.spec_to_dict(j.spec))})
            c.execute(text("INSERT INTO tasks (job_id, role, task_index, state, ports, gpus, retries) "
                           "VALUES (:id, 'worker', 0, 'SUCCEEDED', '{}', '[]', 0)"), {"id": j.id})
            keyword.rebuild(c)
        with db.engine.begin() as c:
            migrations.upgrade(c)
        with db.session() as s:
            found = store_jobs.get_job(s, "alice~old-train")
            assert (found.retries, found.platform_retries, found.attempt_index) == (2, 0, 2)
            assert [t.state for t in found.tasks] == [TaskState.SUCCEEDED]
            assert keyword.count(s, "train") == 1 and tags.tags_of(s, j.id) == []
