"""A user's latest finished jobs in a VC, newest first, with their run times read from the index alone: the
typical run time that waiting reasons' ETAs fall back on (``pai.store.durations``).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None

_NAME = "ix_jobs_user_name_vc_state_completed_at_started_at"


def upgrade() -> None:
    op.create_index(_NAME, "jobs", ["user_name", "vc", "state", "completed_at", "started_at"])


def downgrade() -> None:
    op.drop_index(_NAME, table_name="jobs")
