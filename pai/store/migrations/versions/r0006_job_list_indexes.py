"""The job list's indexes: its order ``(submitted_at, id)``, alone (with ``name``, which the keyword filter
reads) and after each equality filter.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

_ORDER = ["submitted_at", "id"]
_FILTERS = ("user_name", "vc", "state")


def upgrade() -> None:
    op.create_index("ix_jobs_submitted_at_id_name", "jobs", [*_ORDER, "name"])
    for first in _FILTERS:
        op.create_index(f"ix_jobs_{first}_submitted_at_id", "jobs", [first, *_ORDER])


def downgrade() -> None:
    for first in _FILTERS:
        op.drop_index(f"ix_jobs_{first}_submitted_at_id", table_name="jobs")
    op.drop_index("ix_jobs_submitted_at_id_name", table_name="jobs")
