"""When each trial metric arrived (``trial_metrics.reported_at``): the searcher replays reports in the order they
came (pai.launcher.searcher), as Optuna's pruner would have seen them live; rows written before have 0 and keep
the order of their steps.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("trial_metrics") as batch:
        batch.add_column(sa.Column("reported_at", sa.Double(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("trial_metrics") as batch:
        batch.drop_column("reported_at")
