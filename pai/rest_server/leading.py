"""The launcher's election in ``pai master``: an Elector (``pai.launcher.leadership``) for the launcher's lease, whose
answers set the master's Role (``pai.launcher.role``), and ``GET /api/v2/masters``.

Elected at epoch n, the launcher leads (``Launcher.lead``: its commands carry n, and on PostgreSQL its scheduling
pass, agents' messages and node timeout are fenced by n) and the loop acts; deposed, the loop stops acting, the
agents' channels are closed and the agents' endpoints answer NotLeaderError with the leader's URL. The REST API for
users serves all along: a submission to a standby is stored, and the leader hears of it at its commit
(``pai.rest_server.wakeups``: LISTEN/NOTIFY) and admits it in its next pass; at the latest, at its next full pass
(``--full-pass-seconds``).

On SQLite the lease is taken at start and a second master on the same file is refused (MasterRunningError); one
whose holder died without giving the lease up (SIGKILL) is recognised by its process id (SQLite is one machine)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from aiohttp import web

from pai.domain.errors import MasterRunningError
from pai.launcher.leadership import Elector, Leadership
from pai.rest_server.keys import CHANNELS, CONFIG, DB, LAUNCHER, LOOP, ROLE, SERVICE, STORE
from pai.rest_server.service import Context, credentials, reads
from pai.store import leases, masters
from pai.store.leases import LeaseState
from pai.store.liveness import Liveness

log = logging.getLogger("pai.master")
T = TypeVar("T")


def new_holder(url: str) -> str:
    """The lease holder of this master's process: "<url>#<pid>.<random>"."""
    return f"{url}#{os.getpid()}.{secrets.token_hex(4)}"


def _dead_here(holder: str) -> bool:
    """Whether ``holder`` names a process of this machine that has ended (SQLite only: one machine)."""
    try:
        pid = int(holder.rsplit("#", 1)[1].split(".", 1)[0])
        os.kill(pid, 0)
    except (IndexError, ValueError, PermissionError):
        return False
    except ProcessLookupError:
        return True
    return False


async def leadership(app: web.Application) -> AsyncIterator[None]:
    config, db, store, launcher, role = app[CONFIG], app[DB], app[STORE], app[LAUNCHER], app[ROLE]
    holder, timing, metrics = role.holder, config.lease, launcher.metrics
    sqlite = db.engine.dialect.name == "sqlite"

    loop = asyncio.get_running_loop()

    liveness = None if sqlite else Liveness(db.conninfo())
    stale_after = 2 * timing.renew_every  # a lease its holder has not renewed for this long, with its session gone

    def ask(epoch: int | None) -> LeaseState:
        # a standby that gets the liveness lock knows the leader's session has ended: it need not wait for the lease
        gone = liveness is not None and epoch is None and liveness.try_hold()
        with db.session() as s:
            lease = leases.acquire_or_renew(s, leases.LAUNCHER, holder, timing.lease_seconds, epoch=epoch,
                                            stale_after=stale_after if gone else None)
            masters.seen(s, holder, lease.epoch, url=config.advertised())
        if liveness is not None:
            if lease.held_by(holder):
                liveness.try_hold()  # the leader holds it (one that took over from a frozen leader gets it later)
            else:
                liveness.release()  # a live leader that does not hold it yet (it took over by expiry) must get it
        return lease

    def writer(fn: Callable[..., T], *args: Any) -> T:
        """Off the event loop; on SQLite through the store's writer thread, where every write goes (two writing
        threads would fail each other's transactions with "database is locked")."""
        if not sqlite:
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(store.call(fn, *args), loop).result(timeout=timing.lease_seconds)

    def attempt(epoch: int | None) -> LeaseState:
        began = time.perf_counter()
        try:
            lease = writer(ask, epoch)
        finally:
            metrics.lease_seconds.observe(time.perf_counter() - began)
        role.saw(lease)
        return lease

    def give_up(epoch: int, who: str) -> bool:
        with db.session() as s:
            return leases.release(s, leases.LAUNCHER, who, epoch)

    def forget() -> None:
        with db.session() as s:
            masters.forget(s, holder)

    def release(epoch: int, who: str = holder) -> bool:
        return writer(give_up, epoch, who)

    def lead(epoch: int) -> None:
        launcher.lead(epoch, fence=not sqlite)
        role.lead(epoch)
        log.info("this master leads url=%s epoch=%d", config.advertised(), epoch)

    async def elected(epoch: int) -> None:  # a standby takes over: a pass at once
        lead(epoch)
        app[LOOP].wake()

    async def close_channels() -> None:
        await app[CHANNELS].close()  # the agents come back, are told the leader, and go there

    stopping = asyncio.Event()  # a clean stop steps down too: said at INFO, not as a warning

    async def deposed() -> None:
        if role.stand_by():
            log.log(logging.INFO if stopping.is_set() else logging.WARNING,
                    "this master is a standby now url=%s leader=%s", config.advertised(), role.leader)
        await close_channels()

    role.on_deposed = close_channels
    elector = Elector(holder, attempt, release, elected, deposed, timing=timing)
    asked = time.monotonic()
    lease = await asyncio.to_thread(attempt, None)  # before serving: a master alone leads from its first request
    if sqlite and not lease.held_by(holder) and lease.expires_at >= time.time() and _dead_here(lease.holder):
        log.warning("taking over the lease of a master that ended holder=%s", lease.holder)
        await asyncio.to_thread(release, lease.epoch, lease.holder)
        lease = await asyncio.to_thread(attempt, None)
    if lease.held_by(holder):
        elector.state = Leadership(lease.epoch, asked)
        lead(lease.epoch)
    elif sqlite:
        await asyncio.to_thread(writer, forget)
        raise MasterRunningError(config.db_url(), masters.url_of(lease.holder) or "?")
    else:
        log.info("this master is a standby url=%s leader=%s epoch=%d", config.advertised(), role.leader, lease.epoch)
    task = asyncio.create_task(elector.run(), name="launcher-lease")
    yield
    stopping.set()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    try:
        await asyncio.to_thread(writer, forget)
    except Exception as e:  # its row ages out of the list
        log.warning("master not unlisted holder=%s error=%r", holder, e)
    if liveness is not None:
        await asyncio.to_thread(liveness.close)


@reads
def _masters(c: Context, within: float) -> list[masters.Master]:
    with c.db.session() as s:
        return masters.recent(s, within)


async def list_masters(request: web.Request) -> web.Response:
    """``GET /api/v2/masters``: every master that asked for the launcher's lease lately, the leader first."""
    config = request.app[CONFIG]
    rows = await request.app[SERVICE](credentials(request), _masters, 2 * config.lease.lease_seconds)
    body: list[dict[str, Any]] = [{"url": m.url, "launcherUrl": masters.url_of(m.holder), "role": m.role,
                                   "epoch": m.epoch, "lastRenewal": round(m.seen_at * 1000),
                                   "self": m.url == config.advertised()} for m in rows]
    return web.json_response(body)
