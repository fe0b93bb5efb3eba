"""Rotating the secret key: every sealed job token and the check value sealed again with the newest key.

``rotate(db, keyring)`` takes a keyring that holds the new key first and the old one after it (``MultiFernet.rotate``
opens with any, seals with the first), in one transaction: a rotation that stops half-way leaves every token as it
was. ``pai secret-key rotate`` (``pai.commands.secretkey``) keeps the old key readable on disk until this is done.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, insert, select, update

from pai.store.db import Database
from pai.store.keyring import CHECK_TEXT, Keyring
from pai.store.schema import JobRow, SecretKeyCheckRow

BATCH = 500


@dataclass(frozen=True, slots=True)
class Rotated:
    jobs: int  # the jobs whose sealed secrets were sealed again


def rotate(db: Database, keyring: Keyring) -> Rotated:
    """Seal everything ``db`` holds sealed again with ``keyring``'s newest key; SecretKeyError (nothing changed) when
    a token opens with none of its keys. The schema must be at head (``db.migrate()`` first)."""
    with db.maintenance() as connection:  # no master starts (and checks its key) half-way
        _rotate_check(connection, keyring)
        return Rotated(jobs=_rotate_jobs(connection, keyring))



def _rotate_check(connection: Connection, keyring: Keyring) -> None:
    token = connection.scalar(select(SecretKeyCheckRow.token).where(SecretKeyCheckRow.id == 1))
    if token is None:
        connection.execute(insert(SecretKeyCheckRow).values(id=1, token=keyring.seal(CHECK_TEXT)))
        return
    connection.execute(update(SecretKeyCheckRow).where(SecretKeyCheckRow.id == 1)
                       .values(token=keyring.rotate(token)))


def _rotate_jobs(connection: Connection, keyring: Keyring) -> int:
    done, last = 0, ""
    while True:
        batch = connection.execute(select(JobRow.id, JobRow.sealed)
                                   .where(JobRow.id > last, JobRow.sealed.is_not(None))
                                   .order_by(JobRow.id).limit(BATCH)).all()
        for job_id, token in batch:
            assert token is not None  # selected for it
            connection.execute(update(JobRow).where(JobRow.id == job_id).values(sealed=keyring.rotate(token)))
        done += len(batch)
        if len(batch) < BATCH:
            return done
        last = batch[-1][0]
