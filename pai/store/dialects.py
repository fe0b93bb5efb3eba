"""Statements that SQLAlchemy spells once for each dialect, built for both databases pai runs on and looked up by
the session's dialect's name (``s.get_bind().dialect.name``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite


def insert_new(table: Table, *returning: Any) -> dict[str, Any]:
    """``INSERT INTO table ... ON CONFLICT DO NOTHING RETURNING returning``, by dialect: a row that conflicts with one
    there is neither inserted nor returned (a rowcount is not reliable on every driver), and the transaction goes on
    as it was, without a SAVEPOINT around the insert (PostgreSQL aborts a transaction on an IntegrityError)."""
    return {name: insert(table).on_conflict_do_nothing().returning(*returning)
            for name, insert in (("postgresql", postgresql.insert), ("sqlite", sqlite.insert))}
