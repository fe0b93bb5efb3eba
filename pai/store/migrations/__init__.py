"""Schema migrations (Alembic revisions under ``versions/``), run programmatically: no alembic.ini.

To write a new revision, copy the newest file in ``versions/``, give it a new ``revision`` and set
``down_revision`` to the previous one; ``tests/store`` checks that head matches ``pai.store.schema``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

if TYPE_CHECKING:
    from pai.store.keyring import Keyring

SCRIPT_LOCATION = Path(__file__).resolve().parent
KEYRING = "pai.keyring"  # the attribute a revision that seals secrets reads its keyring from (keyring_of)


def alembic_config(connection: Connection | None = None, keyring: Keyring | None = None) -> Config:
    """An Alembic configuration built in memory; env.py runs on ``connection`` when one is given. ``keyring``: the
    master's ``pai.store.keyring.Keyring``, for the revisions that seal or open secrets."""
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    config.attributes[KEYRING] = keyring
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migration revisions found"
    return head


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection, target: str = "head", keyring: Keyring | None = None) -> None:
    """Bring the schema on ``connection`` to ``target`` inside the connection's transaction."""
    command.upgrade(alembic_config(connection, keyring), target)


def downgrade(connection: Connection, target: str, keyring: Keyring | None = None) -> None:
    command.downgrade(alembic_config(connection, keyring), target)
