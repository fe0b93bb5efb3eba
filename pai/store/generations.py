"""Generations: one counter per cache that the masters' processes keep of the database (``GenerationRow``).

A process caches what it reads on every request (who a token speaks for, the cluster configuration); several
processes, of several masters, share one database, so a write made through one of them must reach every cache.
Each write that changes what a cache holds calls ``bump`` in its own transaction: the counter moves when, and only
when, the write commits (a rolled-back write moves nothing). A reader calls ``read`` (or ``value``) in the
transaction of its lookup, before it reads the data, and uses a cached value only if it was cached at the generation
the database shows now; else it reads again and caches the result under that generation. Reading the counter
first makes that safe on PostgreSQL's READ COMMITTED too: data read after it is at least as new as it.

A name without a row (a database emptied by a test) reads as 0, and ``bump`` makes its row.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from pai.store.schema import GenerationRow

ACCOUNTS = "accounts"  # users, their groups and admin flag, tokens, groups and what they grant
CLUSTER = "cluster"  # the cluster configuration: VCs, their status, the settings (storages, local paths, ...)
NAMES = (ACCOUNTS, CLUSTER)


def bump(s: Session, *names: str) -> None:
    """Move the counters ``names`` on, in ``s``'s transaction (in a fixed order, so that two writers bumping the
    same two never wait for each other in a cycle). Unknown names: ValueError."""
    unknown = set(names) - set(NAMES)
    if unknown:
        raise ValueError(f"names: {', '.join(sorted(unknown))} are not generations (known: {', '.join(NAMES)})")
    insert = postgresql.insert if s.get_bind().dialect.name == "postgresql" else sqlite.insert
    for name in sorted(set(names)):
        s.execute(insert(GenerationRow).values(name=name, value=1).on_conflict_do_update(
            index_elements=[GenerationRow.name], set_={"value": GenerationRow.value + 1}))


def read(s: Session) -> dict[str, int]:
    """Every counter, in one SELECT of the small table (a name without a row: absent)."""
    return {name: value for name, value in s.execute(select(GenerationRow.name, GenerationRow.value))}


# built once (its cache key too) and run on the session's connection: every request reads it
_VALUE = select(GenerationRow.value).where(GenerationRow.name == bindparam("name"))


def value(s: Session, name: str) -> int:
    """One counter (0 when it has no row)."""
    found = s.connection().execute(_VALUE, {"name": name}).scalar()
    return 0 if found is None else int(found)
