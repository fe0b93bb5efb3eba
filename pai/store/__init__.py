"""Persistence: SQLAlchemy tables and repositories (modules of functions taking a ``Session`` first).

Typical use: ``db = Database(database_url())``, ``db.migrate()`` at start-up, then
``with db.session() as s: jobs.insert_job(s, job, config_text)``; ``db.dispose()`` on shutdown.
"""

from pai.store import codec, history, jobs, nodes, tokens, users
from pai.store.db import Database, database_url, default_data_dir
from pai.store.records import JobEvent, TaskAttempt, User

__all__ = [
    "Database",
    "JobEvent",
    "TaskAttempt",
    "User",
    "codec",
    "database_url",
    "default_data_dir",
    "history",
    "jobs",
    "nodes",
    "tokens",
    "users",
]
