"""Migration 0021 adds ``jobs.last_resized_at`` (elastic jobs, issue 31): a job stored before has never been
resized; the time an elastic job last grew or shrank is kept with its members (its tasks), on both backends."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from sqlalchemy import text

from pai.domain.job import Task
from pai.domain.states import JobState
from pai.store import codec, jobs, migrations

from .builders import job
from .conftest import Kind, make_database

INSERT = text("INSERT INTO jobs (id, user_name, name, vc, state, priority, protocol_version, config_text, spec, "
              "submitted_at, retries) VALUES (:id, :user, :name, 'default', 'WAITING', 10, 2, '{}', :spec, 1, 0)")


def test_a_job_stored_before_0021_was_never_resized_and_keeps_its_resizes_after(kind: Kind, tmp_path: Path) -> None:
    old = job("old")
    with make_database(kind, tmp_path, migrate=False) as db:
        with db.engine.begin() as c:
            migrations.upgrade(c, "0020")
            c.execute(INSERT, {"id": old.id, "user": old.user, "name": old.name,
                               "spec": json.dumps(codec.spec_to_dict(old.spec))})
        db.migrate()
        with db.session() as s:
            stored = jobs.get_job(s, old.key)
            assert stored.last_resized_at is None
            grown = replace(stored, state=JobState.RUNNING, last_resized_at=1234.5,
                            tasks=(Task("worker", 0), Task("worker", 1)))
            jobs.save_job(s, grown)
        with db.session() as s:
            again = jobs.get_job(s, old.key)
        assert (again.last_resized_at, [t.index for t in again.tasks]) == (1234.5, [0, 1])
