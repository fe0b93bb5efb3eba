"""Samples of every virtual cluster's usage over time (the dashboard's usage chart): one row per VC per sample,
kept for a few days (``pai.launcher.usage``).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

AMOUNTS = ("gpu", "cpu", "memory_mb", "guaranteed_gpu", "guaranteed_cpu", "guaranteed_memory_mb", "max_gpu", "max_cpu",
           "max_memory_mb", "running_jobs", "waiting_jobs")


def upgrade() -> None:
    op.create_table(
        "vc_usage_samples",
        sa.Column("vc", sa.String(255), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        *[sa.Column(name, sa.Integer(), nullable=False) for name in AMOUNTS],
        sa.PrimaryKeyConstraint("vc", "at", name=op.f("pk_vc_usage_samples")),
    )
    op.create_index(op.f("ix_vc_usage_samples_at"), "vc_usage_samples", ["at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_vc_usage_samples_at"), table_name="vc_usage_samples")
    op.drop_table("vc_usage_samples")
