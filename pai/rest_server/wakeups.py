"""The launcher hears the writes made through other masters (issue 27): on PostgreSQL, a ``Listener``
(``pai.launcher.listener``) on the wake-up channel of ``pai.store.wakeups`` hands each notification to the launcher
(``Launcher.heard``, applied by its next pass) and wakes its loop, so that a job submitted, stopped or re-prioritised
through a standby, or a node cordoned there, is acted on at once rather than at the next full pass. Every master
listens; a standby's loop drops what it heard (it reloads everything once elected). On SQLite (one master) it does
nothing: the writes are this process's own and call the launcher in-process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from pai.launcher.listener import Listener
from pai.rest_server.keys import DB, LAUNCHER, LOOP
from pai.store.wakeups import Wakeup


async def wakeups(app: web.Application) -> AsyncIterator[None]:
    """A ``cleanup_ctx``, after the launcher's loop's."""
    db, launcher, loop = app[DB], app[LAUNCHER], app[LOOP]
    if db.dialect != "postgresql":
        yield
        return

    def heard(wakeup: Wakeup | None) -> None:
        launcher.heard(wakeup)
        loop.wake()

    listener = Listener(db.conninfo(), heard, lambda: heard(None))
    task = asyncio.create_task(listener.run(), name="launcher-wakeups")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
