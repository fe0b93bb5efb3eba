"""Database URLs for tests that start their own master: SQLite in a temp dir, or a private PostgreSQL schema."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
