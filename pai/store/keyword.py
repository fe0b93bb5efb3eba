"""The keyword filter's index: job names by trigram, so that a name substring is found without reading every name.

A keyword (a case-insensitive substring of the job's name; names are ``[A-Za-z0-9._-]``, so case is ASCII case)
of at least three characters is looked up in ``job_names``:

- SQLite: an FTS5 table with the ``trigram`` tokenizer over ``jobs.name`` (external content: it stores only the
  index, its rowid is the job row's rowid). The keyword is queried as a phrase of its trigrams, which matches
  exactly the names that contain it; the tokenizer folds case.
- PostgreSQL: a narrow table ``job_names(job_id, name_lower)`` with a ``pg_trgm`` GIN index on ``name_lower``
  and ``LIKE '%keyword%'`` (the index finds the candidates, the row is rechecked). When the extension cannot be
  created (not installed, no privilege) the table has no GIN index: a keyword is then a scan of narrow rows.

A new job is added by ``add`` in the transaction that inserts it (``store.jobs.insert_job``) and taken out by
``remove`` in the one that deletes it (``store.jobs.delete_job``); names never change, so nothing else writes here.
``pai.store.summaries`` decides, from ``count``, whether a page is read through the index (few matches) or by
walking the list's order and testing each name (many matches: the page fills after a few rows). Shorter keywords
have no trigram and are always that walk.
"""

from __future__ import annotations

import logging

from sqlalchemy import ColumnElement, Connection, column, func, literal_column, select, table, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from pai.store.schema import JobRow

log = logging.getLogger(__name__)

TABLE = "job_names"
MIN_LENGTH = 3  # a trigram: a shorter keyword has none to look up
_NAMES = table(TABLE, column("rowid"), column("job_id"), column("name_lower"))


def indexable(keyword: str) -> bool:
    return len(keyword) >= MIN_LENGTH


def is_index_table(name: str) -> bool:
    """``job_names`` and, on SQLite, its FTS5 shadow tables: not ORM models (schema comparison leaves them out)."""
    return name == TABLE or name.startswith(f"{TABLE}_")


def _phrase(keyword: str) -> str:
    """The FTS5 string for ``keyword``: double quotes doubled, so every character is literal."""
    return '"' + keyword.replace('"', '""') + '"'


def _matches(dialect: str, keyword: str) -> ColumnElement[bool]:
    if dialect == "sqlite":
        return literal_column(TABLE).op("MATCH")(_phrase(keyword))
    return _NAMES.c.name_lower.contains(keyword.lower(), autoescape=True)


def count(s: Session, keyword: str) -> int:
    """How many jobs' names contain ``keyword`` (at least MIN_LENGTH characters)."""
    dialect = s.get_bind().dialect.name
    return int(s.scalar(select(func.count()).select_from(_NAMES).where(_matches(dialect, keyword))) or 0)


def condition(dialect: str, keyword: str) -> ColumnElement[bool]:
    """A condition on ``jobs`` rows: the name contains ``keyword``, found through the index."""
    if dialect == "sqlite":
        found = select(_NAMES.c.rowid).where(_matches(dialect, keyword))
        return literal_column(f"{JobRow.__tablename__}.rowid").in_(found)
    return JobRow.id.in_(select(_NAMES.c.job_id).where(_matches(dialect, keyword)))


def add(s: Session, job_id: str, name: str) -> None:
    """Index a job just inserted (its row is flushed), in the same transaction."""
    if s.get_bind().dialect.name == "sqlite":
        s.execute(text(f"INSERT INTO {TABLE}(rowid, name) SELECT rowid, name FROM jobs WHERE id = :id"), {"id": job_id})
    else:
        s.execute(text(f"INSERT INTO {TABLE}(job_id, name_lower) VALUES (:id, :name)"),
                  {"id": job_id, "name": name.lower()})


def remove(s: Session, job_id: str) -> None:
    """Take a job out of the index before its row is deleted, in the same transaction (PostgreSQL's rows go with
    the job's by their foreign key; SQLite's external-content index is told the name it indexed)."""
    if s.get_bind().dialect.name == "sqlite":
        s.execute(text(f"INSERT INTO {TABLE}({TABLE}, rowid, name) SELECT 'delete', rowid, name FROM jobs "
                       "WHERE id = :id"), {"id": job_id})


def rebuild(c: Connection) -> None:
    """Index every stored job again (after rows were written around ``add``: a migration, a bulk load, a reset)."""
    if c.dialect.name == "sqlite":
        c.execute(text(f"INSERT INTO {TABLE}({TABLE}) VALUES ('rebuild')"))
    else:
        c.execute(text(f"DELETE FROM {TABLE}"))
        c.execute(text(f"INSERT INTO {TABLE}(job_id, name_lower) SELECT id, lower(name) FROM jobs"))


def create(c: Connection) -> None:
    """Create the index for the connection's database and fill it from the stored jobs (migration 0008)."""
    if c.dialect.name == "sqlite":
        c.execute(text(f"CREATE VIRTUAL TABLE {TABLE} USING fts5(name, tokenize='trigram', content='jobs', "
                       "content_rowid='rowid')"))
    else:
        c.execute(text(f"CREATE TABLE {TABLE} (job_id VARCHAR(36) NOT NULL, name_lower VARCHAR(255) NOT NULL, "
                       f"CONSTRAINT pk_{TABLE} PRIMARY KEY (job_id), CONSTRAINT fk_{TABLE}_job_id_jobs "
                       "FOREIGN KEY(job_id) REFERENCES jobs (id) ON DELETE CASCADE)"))
        opclass = _trigram_opclass(c)
        if opclass is not None:
            c.execute(text(f"CREATE INDEX ix_{TABLE}_name_lower ON {TABLE} USING gin (name_lower {opclass})"))
    rebuild(c)


def _trigram_opclass(c: Connection) -> str | None:
    """pg_trgm's GIN operator class, schema-qualified, creating the extension if it is missing; None (and a
    warning) where it cannot be had."""
    try:
        with c.begin_nested():
            c.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
    except DBAPIError as e:
        log.warning("keyword index: pg_trgm is not available (%s); a keyword filter scans the job names instead",
                    str(e.orig).strip())
        return None
    schema = c.scalar(text("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                           "WHERE e.extname = 'pg_trgm'"))
    return f'"{schema}".gin_trgm_ops'


def drop(c: Connection) -> None:
    c.execute(text(f"DROP TABLE {TABLE}"))
