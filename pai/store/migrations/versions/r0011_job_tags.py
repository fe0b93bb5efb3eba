"""Job tags (OpenPAI's ``PUT``/``DELETE /api/v2/jobs/{job}/tag``) and the count of requeues the platform caused
(OpenPAI's ``retryDetails.platform``; ``retries`` stays the count against ``retryCount``).

Columns are added in place (``ALTER TABLE ADD COLUMN``): a copy of ``jobs`` would cascade to its tasks, attempts
and events, and renumber the rows the keyword index points at.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("platform_retries", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "job_tags",
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("tag", sa.String(256), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_tags_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "tag", name=op.f("pk_job_tags")),
    )
    op.create_index(op.f("ix_job_tags_tag_job_id"), "job_tags", ["tag", "job_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_job_tags_tag_job_id"), table_name="job_tags")
    op.drop_table("job_tags")
    with op.batch_alter_table("jobs", recreate="never") as batch:
        batch.drop_column("platform_retries")
