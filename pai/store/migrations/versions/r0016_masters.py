"""Masters (``pai.store.masters``): one row per master that asks for the launcher's lease, renewed with its lease
ticks, for ``GET /api/v2/masters``.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "masters",
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("seen_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("holder", name=op.f("pk_masters")),
    )


def downgrade() -> None:
    op.drop_table("masters")
