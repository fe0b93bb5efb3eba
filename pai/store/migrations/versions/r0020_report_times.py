"""When each trial metric arrived (``trial_metrics.reported_at``): the searcher replays reports in the order they
came (pai.launcher.searcher), as Optuna's pruner would have seen them live; rows written before have 0 and keep
the order of their steps. And each trial's latest and best value of its searcher's metric
(``trials.latest_step``, ``latest_value``, ``best_step``, ``best_value``), kept by every report: an experiment's
view reads them instead of aggregating its values (those written before are computed here once).

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None


SUMMARY: tuple[tuple[str, sa.types.TypeEngine[Any]], ...] = (
    ("latest_step", sa.BigInteger()), ("latest_value", sa.Double()), ("best_step", sa.BigInteger()),
    ("best_value", sa.Double()))


def upgrade() -> None:
    with op.batch_alter_table("trial_metrics") as batch:
        batch.add_column(sa.Column("reported_at", sa.Double(), nullable=False, server_default="0"))
    with op.batch_alter_table("trials") as batch:
        for name, kind in SUMMARY:
            batch.add_column(sa.Column(name, kind, nullable=True))
    _summarize(op.get_bind())


def _summarize(connection: sa.Connection) -> None:
    """The summaries of the trials written before (none, on a cluster that never ran an experiment)."""
    rows = connection.execute(sa.text(
        "SELECT t.id, e.spec FROM trials t JOIN experiments e ON e.id = t.experiment_id")).all()
    for trial_id, spec in rows:
        searcher = (spec if isinstance(spec, dict) else json.loads(spec)).get("searcher", {})
        metric, smaller = searcher.get("metric"), searcher.get("smallerIsBetter", True)
        values = connection.execute(sa.text(
            "SELECT step, value FROM trial_metrics WHERE trial_id = :t AND name = :n ORDER BY step"),
            {"t": trial_id, "n": metric}).all()
        if not values:
            continue
        latest = values[-1]
        best = min(values, key=lambda v: ((v[1] if smaller else -v[1]), v[0]))
        connection.execute(sa.text(
            "UPDATE trials SET latest_step = :ls, latest_value = :lv, best_step = :bs, best_value = :bv WHERE id = :t"),
            {"ls": latest[0], "lv": latest[1], "bs": best[0], "bv": best[1], "t": trial_id})


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        for name, _ in SUMMARY:
            batch.drop_column(name)
    with op.batch_alter_table("trial_metrics") as batch:
        batch.drop_column("reported_at")
