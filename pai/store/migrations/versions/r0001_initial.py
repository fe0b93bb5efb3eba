"""Initial schema: users, tokens, jobs, tasks, task_attempts, job_events, nodes.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

NAME = sa.String(255)
JSON = sa.JSON()
NULLABLE_JSON = sa.JSON(none_as_null=True)


def _time(name: str, nullable: bool = False) -> sa.Column[float]:
    return sa.Column(name, sa.Double(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("admin", sa.Boolean(), nullable=False),
        _time("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("name", name="uq_users_name"),
    )
    op.create_table(
        "tokens",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        _time("expires_at", nullable=True),
        _time("created_at"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_tokens_user_id_users", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("token_hash", name="pk_tokens"),
    )
    op.create_index("ix_tokens_user_id", "tokens", ["user_id"])
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("user_name", NAME, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("vc", NAME, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("protocol_version", sa.Integer(), nullable=False),
        sa.Column("config_text", sa.Text(), nullable=False),
        sa.Column("spec", JSON, nullable=False),
        _time("submitted_at"),
        _time("started_at", nullable=True),
        _time("completed_at", nullable=True),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("exit_reason", sa.Text(), nullable=True),
        sa.Column("waiting_reason", NULLABLE_JSON, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.UniqueConstraint("user_name", "name", name="uq_jobs_user_name_name"),
    )
    op.create_index("ix_jobs_state", "jobs", ["state"])
    op.create_index("ix_jobs_vc", "jobs", ["vc"])
    op.create_index("ix_jobs_submitted_at", "jobs", ["submitted_at"])
    op.create_table(
        "tasks",
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("role", NAME, nullable=False),
        sa.Column("task_index", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("node", NAME, nullable=True),
        sa.Column("address", NAME, nullable=True),
        sa.Column("ports", JSON, nullable=False),
        sa.Column("gpus", JSON, nullable=False),
        sa.Column("attempt_id", NAME, nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("exit_reason", sa.Text(), nullable=True),
        sa.Column("retries", sa.Integer(), nullable=False),
        _time("started_at", nullable=True),
        _time("finished_at", nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_tasks_job_id_jobs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "role", "task_index", name="pk_tasks"),
    )
    op.create_index("ix_tasks_job_id", "tasks", ["job_id"])
    op.create_table(
        "task_attempts",
        sa.Column("attempt_id", NAME, nullable=False),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("job_attempt", sa.Integer(), nullable=False),
        sa.Column("role", NAME, nullable=False),
        sa.Column("task_index", sa.Integer(), nullable=False),
        sa.Column("node", NAME, nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("exit_reason", sa.Text(), nullable=True),
        _time("started_at", nullable=True),
        _time("finished_at", nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_task_attempts_job_id_jobs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("attempt_id", name="pk_task_attempts"),
    )
    op.create_index("ix_task_attempts_job_id", "task_attempts", ["job_id"])
    op.create_table(
        "job_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(36), nullable=False),
        _time("at"),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("details", NULLABLE_JSON, nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_job_events_job_id_jobs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_job_events"),
    )
    op.create_index("ix_job_events_job_id", "job_events", ["job_id"])
    op.create_table(
        "nodes",
        sa.Column("name", NAME, nullable=False),
        sa.Column("address", NAME, nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("cpu", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("gpu_type", NAME, nullable=True),
        sa.Column("labels", JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        _time("last_heartbeat"),
        sa.Column("log_port", sa.Integer(), nullable=False),
        sa.Column("failed_gpus", JSON, nullable=False),
        sa.Column("port_low", sa.Integer(), nullable=False),
        sa.Column("port_high", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_nodes"),
    )


def downgrade() -> None:
    for table in ("nodes", "job_events", "task_attempts", "tasks", "jobs", "tokens", "users"):
        op.drop_table(table)
