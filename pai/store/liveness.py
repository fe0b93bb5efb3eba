"""Whether the leading launcher's database session is alive: a session-level advisory lock (PostgreSQL).

The leader holds ``pg_advisory_lock`` on a connection of its own for as long as it leads. PostgreSQL releases it the
moment that session ends: the process killed (its socket closed by the kernel), or its machine gone (the session's
TCP keepalives, set here to a few seconds, find the peer dead). A standby that gets the lock therefore knows that no
live session holds it, and may take the lease from a holder that has stopped renewing, without waiting for the lease
to run out (``leases.acquire_or_renew(stale_after=...)``). A leader that is alive but frozen (SIGSTOP, a VM paused)
keeps its session, and so the lock: its lease runs out as before. The lease row stays the one source of the epoch:
the lock only says "the holder's session is gone".
"""

from __future__ import annotations

import contextlib
import logging

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

log = logging.getLogger("pai.store.liveness")

# The launcher's lock in the database's advisory lock space: (the schema's hash, this), so that clusters in several
# schemas of one database (the tests') do not share it
LOCK_KEY = 0x70616931  # "pai1"
# The session's own TCP keepalives (server side): a peer gone without a word is found in about 11 s, not 2 hours.
KEEPALIVES = "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3"


class Liveness:
    """The advisory lock on a connection of its own (sync: the Elector asks from its thread)."""

    def __init__(self, conninfo: str, key: int = LOCK_KEY) -> None:
        self.conninfo, self.key = conninfo, key
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self.held = False

    def try_hold(self) -> bool:
        """Hold the lock if no live session does; True while this one holds it (its session checked alive). A failed
        connection is dropped, the lock with it, and answers False."""
        try:
            if self._conn is None or self._conn.closed:
                self.held = False
                params = conninfo_to_dict(self.conninfo)
                params["options"] = f"{params.get('options') or ''} {KEEPALIVES}".strip()  # a search_path kept
                self._conn = psycopg.connect(make_conninfo("", **params), autocommit=True)
            if self.held:
                self._conn.execute("SELECT 1")  # the session is alive, so the lock is still its own
                return True
            row = self._conn.execute("SELECT pg_try_advisory_lock(hashtext(current_schema()), %s)",
                                     (self.key,)).fetchone()
            self.held = bool(row and row[0])
        except psycopg.Error as e:
            log.warning("liveness lock not asked error=%r", e)
            self.close()
        return self.held

    def release(self) -> None:
        if self.held and self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.execute("SELECT pg_advisory_unlock_all()")
        self.held = False

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn, self.held = None, False
