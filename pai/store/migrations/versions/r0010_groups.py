"""OpenPAI's users and groups: groups (what they grant is in ``extension.acls``), memberships, users' e-mail and
extension. Admins become the members of ``admingroup`` (the ``users.admin`` column goes).

Everyone keeps what they could do before: every user joins ``default``; admins join ``admingroup``; each VC gets
its group (OpenPAI's), and every existing user joins every VC group, since before this revision anyone could submit
to any VC. Narrow it afterwards with ``pai user`` / ``pai group``.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None

NAME = sa.String(255)


def upgrade() -> None:
    groups = op.create_table(
        "groups",
        sa.Column("name", NAME, nullable=False),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        sa.Column("external_name", NAME, nullable=False, server_default=""),
        sa.Column("extension", sa.JSON(), nullable=False, server_default="{}"),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_groups"),
    )
    memberships = op.create_table(
        "memberships",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("group_name", NAME, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_memberships_user_id_users", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["group_name"], ["groups.name"], name="fk_memberships_group_name_groups",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "group_name", name="pk_memberships"),
    )
    op.create_index("ix_memberships_group_name", "memberships", ["group_name"])
    # SQLite drops a column in place (3.35+); a batch copy of ``users`` would cascade-delete its tokens.
    op.add_column("users", sa.Column("email", NAME, nullable=False, server_default=""))
    op.add_column("users", sa.Column("extension", sa.JSON(), nullable=False, server_default="{}"))

    bind = op.get_bind()
    now = time.time()
    vc_names = [r[0] for r in bind.execute(sa.text("SELECT name FROM virtual_clusters ORDER BY position"))]
    seeded = [
        {"name": "default", "description": "the group of every user",
         "extension": {"acls": {"virtualClusters": ["default"]}}},
        {"name": "admingroup", "description": "the cluster's admins", "extension": {"acls": {"admin": True}}},
        *({"name": vc, "description": f"the users of virtual cluster {vc}",
           "extension": {"acls": {"virtualClusters": [vc]}}} for vc in vc_names if vc not in ("default", "admingroup")),
    ]
    op.bulk_insert(groups, [{**g, "external_name": "", "created_at": now} for g in seeded])
    users = list(bind.execute(sa.text("SELECT id, admin FROM users ORDER BY id")))
    rows = []
    for user_id, admin in users:
        names = ["default", *(["admingroup"] if admin else []), *(g["name"] for g in seeded[2:])]
        rows += [{"user_id": user_id, "group_name": n, "position": i} for i, n in enumerate(names)]
    if rows:
        op.bulk_insert(memberships, rows)
    op.drop_column("users", "admin")


def downgrade() -> None:
    op.add_column("users", sa.Column("admin", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute(sa.text(
        "UPDATE users SET admin = TRUE WHERE id IN "
        "(SELECT user_id FROM memberships WHERE group_name = 'admingroup')"
    ))
    op.drop_column("users", "extension")
    op.drop_column("users", "email")
    op.drop_index("ix_memberships_group_name", table_name="memberships")
    op.drop_table("memberships")
    op.drop_table("groups")
