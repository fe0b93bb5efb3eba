"""Experiments (``pai.store.experiments``): hyperparameter searches, their trials, the trials' reported metrics (one
row per trial, step and name) and checkpoints.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_name", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("vc", sa.String(length=255), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("ended_at", sa.Double(), nullable=True),
        sa.Column("stop_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiments")),
        sa.UniqueConstraint("user_name", "name", name=op.f("uq_experiments_user_name_name")),
    )
    op.create_index(op.f("ix_experiments_state"), "experiments", ["state"])
    op.create_table(
        "trials",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("hparams", sa.JSON(), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("stopped_by", sa.String(length=16), nullable=True),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("stop_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("points", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], name=op.f("fk_trials_experiment_id_experiments"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_trials_job_id_jobs"), ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trials")),
        sa.UniqueConstraint("experiment_id", "number", name=op.f("uq_trials_experiment_id_number")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_trials_token_hash")),
    )
    op.create_index(op.f("ix_trials_job_id"), "trials", ["job_id"])
    op.create_table(
        "trial_metrics",
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"], name=op.f("fk_trial_metrics_trial_id_trials"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trial_id", "step", "name", name=op.f("pk_trial_metrics")),
    )
    op.create_table(
        "trial_checkpoints",
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"], name=op.f("fk_trial_checkpoints_trial_id_trials"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trial_id", "step", name=op.f("pk_trial_checkpoints")),
    )


def downgrade() -> None:
    op.drop_table("trial_checkpoints")
    op.drop_table("trial_metrics")
    op.drop_table("trials")
    op.drop_index(op.f("ix_experiments_state"), table_name="experiments")
    op.drop_table("experiments")
