"""The launcher's ear on PostgreSQL: ``LISTEN`` on the wake-up channel (``pai.store.wakeups``) and a callback per
notification.

One dedicated psycopg connection in autocommit (a session that listens must stay open, outside the engine's pool).
Each notification is parsed and handed to ``on_wakeup``, on the event loop. When the connection is lost (the server
restarted, the backend was terminated, the network went), notifications sent meanwhile are gone: the listener
connects again with a capped backoff, listens again, and only then calls ``on_reset``, so that whatever the launcher
reloads then includes every write committed while it was deaf. A connection that goes silent without an error (a
dropped network) is found out by a ``SELECT 1`` after ``check_seconds`` without a notification.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg import sql

from pai.store.wakeups import CHANNEL, Wakeup, parse

log = logging.getLogger("pai.launcher.listener")


@dataclass(frozen=True, slots=True)
class ListenerTiming:
    first_retry_seconds: float = 0.1  # after a lost connection; doubled at each failure
    max_retry_seconds: float = 5.0
    check_seconds: float = 10.0  # this long without a notification: the connection is probed
    timeout_seconds: float = 5.0  # a connection attempt, a probe


class Listener:
    def __init__(self, conninfo: str, on_wakeup: Callable[[Wakeup], None], on_reset: Callable[[], None], *,
                 channel: str = CHANNEL, timing: ListenerTiming | None = None) -> None:
        """``conninfo``: libpq's (``Database.conninfo``). ``on_wakeup``: each notification; ``on_reset``: after a lost
        connection is listening again. Both run on the event loop; an error in them is logged, not raised."""
        self.conninfo = conninfo
        self.on_wakeup = on_wakeup
        self.on_reset = on_reset
        self.channel = channel
        self.timing = timing or ListenerTiming()
        self.listening = asyncio.Event()  # set while LISTEN is in effect
        self.backend_pid: int | None = None  # the listening session's server process, while listening
        self.resets = 0  # how many times on_reset was called

    async def run(self) -> None:
        """Listen until cancelled."""
        timing, delay, deaf = self.timing, self.timing.first_retry_seconds, False
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                        self.conninfo, autocommit=True, connect_timeout=max(1, round(timing.timeout_seconds))) as conn:
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self.backend_pid = conn.info.backend_pid
                    self.listening.set()
                    log.info("listening channel=%s backend_pid=%d", self.channel, self.backend_pid)
                    delay = timing.first_retry_seconds
                    if deaf:
                        deaf = False
                        self.resets += 1
                        self._call(self.on_reset)
                    await self._receive(conn)
            except (psycopg.Error, OSError, TimeoutError) as e:
                self.listening.clear()
                self.backend_pid = None
                deaf = True
                log.warning("listener lost its connection channel=%s retry_in=%.1fs error=%s", self.channel, delay,
                            " ".join(str(e).split()) or type(e).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, timing.max_retry_seconds)
            finally:
                self.listening.clear()

    async def _receive(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        while True:
            heard = False
            async for notify in conn.notifies(timeout=self.timing.check_seconds):
                heard = True
                wakeup = parse(notify.payload)
                if wakeup is None:
                    log.warning("notification not understood channel=%s payload=%r", self.channel, notify.payload[:80])
                else:
                    self._call(self.on_wakeup, wakeup)
            if not heard:  # silent for a while: is the connection still there?
                async with asyncio.timeout(self.timing.timeout_seconds):
                    await conn.execute("SELECT 1")

    @staticmethod
    def _call(fn: Callable[..., None], *args: object) -> None:
        try:
            fn(*args)
        except Exception:  # the listener outlives a bad callback
            log.exception("listener callback failed")
