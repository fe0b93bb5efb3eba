"""``pai secret-key``: the key that seals job secrets in the master's database (docs/operations.md, The secret key).

``generate`` prints a new key (for ``PAI_SECRET_KEY``); ``rotate`` seals every stored secret again with a new key.
With the data directory's key file, ``rotate`` writes the new key in front of the old one first (a master started
meanwhile opens both), seals again in one transaction, then leaves the new key alone in the file. With
``PAI_SECRET_KEY``, it takes the new key from ``--new-key`` (or makes one and prints it): give it to every master.
Stop the masters of the database first: a running master keeps the key it started with.
"""

from __future__ import annotations

import time
from pathlib import Path

import click
from sqlalchemy.exc import SQLAlchemyError

from pai.store import keyring as keyrings
from pai.store import leases
from pai.store.db import Database, database_url, default_data_dir
from pai.store.keyring import KEY_ENV, Keyring, SecretKeyError
from pai.store.rotation import rotate


@click.group("secret-key")
def secret_key() -> None:
    """The key that seals job secrets in the master's database."""


@secret_key.command("generate")
def generate_command() -> None:
    """Print a new key (e.g. for PAI_SECRET_KEY, the same on every master of one database)."""
    click.echo(Keyring.generate().keys[0])


@secret_key.command("rotate")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="The master's data directory (env PAI_DATA_DIR, default ~/.local/share/pai): its secret-key file, "
                   "and its SQLite database unless --database-url.")
@click.option("--database-url", "url", envvar="PAI_DATABASE_URL", default=None,
              help="SQLAlchemy URL (env PAI_DATABASE_URL); default SQLite in the data directory.")
@click.option("--new-key", envvar="PAI_NEW_SECRET_KEY", default=None,
              help="The new key (env PAI_NEW_SECRET_KEY); default: a new one is made.")
def rotate_command(data_dir: Path | None, url: str | None, new_key: str | None) -> None:
    """Seal every stored job secret again with a new key; the old key stays readable until that is done."""
    directory = data_dir or default_data_dir()
    try:
        _rotate(directory, url or database_url(directory), new_key)
    except SecretKeyError as e:
        raise click.ClickException(e.message) from None


def _rotate(directory: Path, url: str, new_key: str | None) -> None:
    current = keyrings.configured(directory)
    if current is None:
        raise click.ClickException(f"no secret key to rotate: {KEY_ENV} is not set and "
                                   f"{keyrings.key_file(directory)} does not exist")
    if _master_running(url):
        raise click.ClickException("a master of this database is running (it holds the launcher's lease): stop "
                                   "every master of it first, since a running master keeps the key it started with")
    new = Keyring((new_key,), "--new-key") if new_key else Keyring.generate()
    both = new.with_older(current)
    from_file = current.source != KEY_ENV
    path = keyrings.key_file(directory)
    db = Database(url, current)
    try:
        db.migrate()  # at head, and the current key is this database's
        if from_file:
            keyrings.save(path, both)  # from here on, a master that starts opens old and new tokens alike
        done = rotate(db, both)
    finally:
        db.dispose()
    if from_file:
        keyrings.save(path, new)  # every token is sealed with the new key: the old one goes
        click.echo(f"sealed the secrets of {done.jobs} job(s) again with a new key, kept in {path}")
        return
    click.echo(f"sealed the secrets of {done.jobs} job(s) again with the new key: set {KEY_ENV} to it on every "
               "master of this database before starting them")
    if not new_key:
        click.echo(new.keys[0])


def _master_running(url: str) -> bool:
    """Whether a master of this database holds the launcher's lease (every master asks for it while it runs)."""
    db = Database(url)
    try:
        with db.session() as s:
            lease = leases.current(s, leases.LAUNCHER)
    except SQLAlchemyError:  # no lease table yet: no master has run this version on it
        return False
    finally:
        db.dispose()
    return lease is not None and lease.holder != leases.RELEASED and lease.expires_at >= time.time()
