"""Alembic environment: always online, on the connection that ``pai.store.migrations.upgrade`` passes in."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from pai.store.schema import metadata


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


_connection = context.config.attributes.get("connection")
if not isinstance(_connection, Connection):
    raise RuntimeError("pai migrations run only through pai.store.migrations.upgrade(connection)")
run_migrations(_connection)
