"""Job secrets sealed at rest (``pai.store.sealing``): a ``sealed`` column on ``jobs``, the secret key's check value,
and every job stored before with its secrets in clear sealed now, its text and spec masked.

The master runs this at start with its keyring (``Database.migrate``: ``PAI_SECRET_KEY`` or the data directory's key
file, made first); a database that holds secrets in clear cannot be migrated without one. Downgrading puts the
sealed values back into the spec (with the keyring); the submitted text keeps its masks.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from pai.store import sealing
from pai.store.keyring import Keyring, SecretKeyError
from pai.store.migrations import KEYRING

revision = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None

BATCH = 500
_jobs = sa.table("jobs", sa.column("id", sa.String), sa.column("spec", sa.JSON), sa.column("config_text", sa.Text),
                 sa.column("sealed", sa.Text))


def upgrade() -> None:
    op.add_column("jobs", sa.Column("sealed", sa.Text(), nullable=True))
    op.create_table(
        "secret_key_check",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_secret_key_check")),
    )
    bind = op.get_bind()
    for job_id, spec, text in _rows(bind, _jobs.c.config_text):
        parts = sealing.parts_of(spec)
        if parts is not None:
            bind.execute(_jobs.update().where(_jobs.c.id == job_id).values(
                spec=sealing.masked_spec(spec), sealed=sealing.seal(_keyring("seal"), parts),
                config_text=sealing.masked_text(text)))


def downgrade() -> None:
    bind = op.get_bind()
    for job_id, spec, token in _rows(bind, _jobs.c.sealed, _jobs.c.sealed.is_not(None)):
        parts = sealing.open_parts(_keyring("open"), token)
        bind.execute(_jobs.update().where(_jobs.c.id == job_id).values(spec=sealing.restored_spec(spec, parts)))
    op.drop_table("secret_key_check")
    op.drop_column("jobs", "sealed")


def _rows(bind: sa.Connection, column: Any, *where: Any) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """``(id, spec, column)`` of every job, a batch at a time in id order (each batch read before it is updated)."""
    last = ""
    while True:
        batch = bind.execute(sa.select(_jobs.c.id, _jobs.c.spec, column).where(_jobs.c.id > last, *where)
                             .order_by(_jobs.c.id).limit(BATCH)).all()
        yield from ((row[0], row[1], row[2]) for row in batch)
        if len(batch) < BATCH:
            return
        last = batch[-1][0]


def _keyring(to: str) -> Keyring:
    keyring = context.config.attributes.get(KEYRING)
    if not isinstance(keyring, Keyring):
        raise SecretKeyError(f"this database holds job secrets, and migration 0014 needs the secret key to {to} "
                             "them: run it from the master (pai master), with PAI_SECRET_KEY or its data directory's "
                             "secret-key", source="none")
    return keyring
