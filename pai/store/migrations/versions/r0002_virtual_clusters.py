"""Virtual clusters and cluster settings; jobs remember who preempts them.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "virtual_clusters",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_virtual_clusters"),
    )
    op.create_table(
        "cluster_settings",
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_cluster_settings"),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("preempted_by", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("preempted_by")
    op.drop_table("cluster_settings")
    op.drop_table("virtual_clusters")
