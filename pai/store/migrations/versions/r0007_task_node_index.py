"""Tasks by node: a heartbeat reads the active jobs with a task on its node, not every active job.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_tasks_node", "tasks", ["node"])


def downgrade() -> None:
    op.drop_index("ix_tasks_node", table_name="tasks")
