"""The keyword filter's index: job names by trigram (``pai.store.keyword``: FTS5 on SQLite, pg_trgm on PostgreSQL),
filled from the jobs already stored.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

from pai.store import keyword

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    keyword.create(op.get_bind())


def downgrade() -> None:
    keyword.drop(op.get_bind())
