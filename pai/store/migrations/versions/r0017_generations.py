"""Generations (``pai.store.generations``): one counter per cache of the masters' processes ("accounts": users,
tokens, groups; "cluster": the cluster configuration), bumped by every write that changes what it caches, read
before every use of the cache.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    table = op.create_table(
        "generations",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_generations")),
    )
    op.bulk_insert(table, [{"name": "accounts", "value": 0}, {"name": "cluster", "value": 0}])


def downgrade() -> None:
    op.drop_table("generations")
