"""Interactive sessions (``pai.store.sessions``): one row per open exec or tunnel session, refreshed while it lives, so
that every API worker of every master counts a user's sessions against the limit.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision: str | None = "0017"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "interactive_sessions",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("user_name", sa.String(length=255), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("opened_at", sa.Double(), nullable=False),
        sa.Column("seen_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_interactive_sessions_job_id_jobs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_interactive_sessions")),
    )
    op.create_index(op.f("ix_interactive_sessions_job_id"), "interactive_sessions", ["job_id"])
    op.create_index(op.f("ix_interactive_sessions_user_name_seen_at"), "interactive_sessions",
                    ["user_name", "seen_at"])


def downgrade() -> None:
    op.drop_table("interactive_sessions")
