"""Database URLs for tests that start their own master: SQLite in a temp dir, or a private PostgreSQL schema."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

from tests.store.conftest import _postgres_schema, require_postgres

BACKENDS = ("sqlite", "postgresql")


@contextmanager
def database_url(kind: str, tmp: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp / 'pai.db'}"
        return
    require_postgres()
    with _postgres_schema() as url:
        yield url


@contextmanager
def statements_of(engine: Engine) -> Iterator[list[str]]:
    """The SQL statements ``engine`` runs inside the block, in order."""
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)
