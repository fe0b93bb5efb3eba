"""Migration 0014 seals the secrets of the jobs stored before it, with the master's key, and refuses to run without."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from pai.domain.jobspec import SECRET_MASK
from pai.store import codec, jobs, migrations, sealing
from pai.store.db import Database
from pai.store.keyring import SecretKeyError

from .builders import job
from .conftest import TEST_KEYRING, Kind, make_database
from .secretjobs import SECRET_VALUES, dump, secret_job

INSERT = text("INSERT INTO jobs (id, user_name, name, vc, state, priority, protocol_version, config_text, spec, "
              "submitted_at, retries) VALUES (:id, :user, :name, 'default', 'WAITING', 10, 2, :text, :spec, 1, 0)")


def _store_at_0013(db: Database) -> tuple[str, str]:
    """A job with secrets and one without, written as a master before 0014 wrote them: in clear."""
    sealed, body = secret_job()
    plain = job("plain")
    with db.engine.begin() as c:
        migrations.upgrade(c, "0013")
        for value, config_text in ((sealed, body), (plain, '{"jobName": "plain"}')):
            c.execute(INSERT, {"id": value.id, "user": value.user, "name": value.name, "text": config_text,
                               "spec": json.dumps(codec.spec_to_dict(value.spec))})
    assert all(secret in dump(db) for secret in SECRET_VALUES)  # in clear before
    return sealed.key, plain.key


def test_the_migration_seals_what_was_stored_in_clear(kind: Kind, tmp_path: Path) -> None:
    with make_database(kind, tmp_path, migrate=False) as db:
        secret_key, plain_key = _store_at_0013(db)
        db.migrate()
        assert [secret for secret in SECRET_VALUES if secret in dump(db)] == []
        with db.session() as s:
            stored = jobs.get_job(s, secret_key)
            assert stored.spec.sealed is not None and stored.spec.secrets == dict.fromkeys(("token", "pw"), SECRET_MASK)
            assert sealing.unsealed(s, stored.spec) == secret_job()[0].spec
            assert SECRET_MASK in jobs.get_config_text(s, secret_key)
            assert jobs.get_job(s, plain_key).spec == job("plain").spec
            assert jobs.get_config_text(s, plain_key) == '{"jobName": "plain"}'


def test_the_migration_needs_the_key_and_changes_nothing_without_it(kind: Kind, tmp_path: Path) -> None:
    with make_database(kind, tmp_path, migrate=False) as db:
        _store_at_0013(db)
        keyless = Database(db.url.render_as_string(hide_password=False))
        try:
            with pytest.raises(SecretKeyError, match="migration 0014 needs the secret key"):
                keyless.migrate()
            assert keyless.revision() == "0013"
        finally:
            keyless.dispose()
        assert all(secret in dump(db) for secret in SECRET_VALUES)


def test_downgrading_puts_the_secrets_back_into_the_spec(kind: Kind, tmp_path: Path) -> None:
    with make_database(kind, tmp_path, migrate=False) as db:
        secret_key, _ = _store_at_0013(db)
        db.migrate()
        with db.engine.begin() as c:
            migrations.downgrade(c, "0013", keyring=TEST_KEYRING)
            spec = c.execute(text("SELECT spec FROM jobs WHERE name = 'secret'")).scalar_one()
        restored = codec.spec_from_dict(spec if isinstance(spec, dict) else json.loads(spec))
        assert restored == secret_job()[0].spec
        assert secret_key == "alice~secret"
