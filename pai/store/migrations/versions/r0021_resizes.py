"""When an elastic job last grew or shrank (``jobs.last_resized_at``, issue 31): the scheduler waits
``scheduler.elastic.resizeIntervalSeconds`` after it before the job grows again. Jobs written before have never
been resized (NULL). A job's size is its tasks: the ``tasks`` rows are its members.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision: str | None = "0020"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("last_resized_at", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("last_resized_at")
