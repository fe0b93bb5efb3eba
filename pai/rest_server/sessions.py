"""Interactive sessions (exec, tunnels) as a request serves them: opened through the service facade (who may, the task
running, the user's limit, an event in the job's history: ``pai.launcher.interactive``), kept alive in the database
while they last, closed on no traffic, and closed in the database with an event saying how they ended.

```python
async with interactive(request, task_ref(request), kind="exec", detail=" ".join(argv)) as session:
    session.task.address, session.task.agent_port, session.task.ports  # where to reach the task
    ...                                  # connect to it first (its refusal is still a plain HTTP answer), then upgrade
    why = await session.until_ended(pump_in(), pump_out())  # each frame either way: session.touch()
    if why is not None:                  # the platform ended it: (code, message), e.g. (IDLE_CODE, "no traffic ...")
        ...                              # say so to the client (exec: an error frame), then close
    session.exit_code = 0                # recorded in the event of its end
```

Opening refuses before anything is relayed: 403 (not the owner nor an admin; or may not read the job), 404 (no such
job, role or index), 409 ``TaskNotRunningError``, 429 ``TooManySessionsError`` (``MasterConfig.max_sessions_per_user``,
counted in the database: every API worker of every master sees every session). While it lives the session's row is
refreshed every ``REFRESH_SECONDS``; a row not refreshed for ``STALE_SECONDS`` (its worker was killed) is not counted.
A refresh that the caller's token no longer allows (revoked, expired) ends the session too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from aiohttp import web

from pai.domain.errors import PaiError
from pai.launcher import interactive as core
from pai.launcher.interactive import Opening, RunningTask, TaskRef
from pai.rest_server.jobs import key_of
from pai.rest_server.keys import CONFIG, SERVICE
from pai.rest_server.logfollow import task_index
from pai.rest_server.service import Context, Credentials, anonymous, credentials, reads, writes

log = logging.getLogger("pai.rest")

IDLE_CODE = "SessionIdleError"  # the code of what ends a session without traffic
REFRESH_SECONDS = 10.0
STALE_SECONDS = 30.0


def task_ref(request: web.Request) -> TaskRef:
    """The task a ``{JOB}/tasks/{role}/{index}/...`` path names."""
    return TaskRef(key_of(request), request.match_info["role"], task_index(request))


@writes()
def _open(c: Context, ref: TaskRef, opening: Opening, limit: int) -> tuple[str, RunningTask]:
    """The caller's name and the task the session reaches."""
    return c.user.name, core.open_session(c.db, c.user, c.launcher.jobs_readable_by_all(), ref, opening, limit=limit,
                                          stale_after=STALE_SECONDS, now=c.launcher.clock())


@reads
def _check(c: Context, ref: TaskRef, kind: str, limit: int) -> None:
    core.check(c.db, c.user, c.launcher.jobs_readable_by_all(), ref, kind, limit=limit, stale_after=STALE_SECONDS)


async def check_session(request: web.Request, ref: TaskRef, *, kind: str) -> None:
    """Raise what opening a session would (403, 404, 409, 429), opening none: the answer to a request that cannot be
    one (no WebSocket), so that a client learns why its upgrade was refused."""
    await request.app[SERVICE](credentials(request), _check, ref, kind, request.app[CONFIG].max_sessions_per_user)


@writes()
def _refresh(c: Context, session_id: str) -> bool:
    return core.refresh(c.db, session_id)


@anonymous(writes=True)  # the master closes what it opened, whatever became of the caller's token
def _close(c: Context, user: str, task: RunningTask, opening: Opening, exit_code: int | None, reason: str | None,
           seconds: float) -> None:
    core.close_session(c.db, user, task, opening, exit_code=exit_code, reason=reason, seconds=seconds,
                       now=c.launcher.clock())


class InteractiveSession:
    def __init__(self, user: str, task: RunningTask, opening: Opening, idle_seconds: float) -> None:
        self.user, self.task, self.opening, self.idle_seconds = user, task, opening, idle_seconds
        self.exit_code: int | None = None  # the caller's: recorded when the session ends
        self.reason: str | None = None  # how it ended otherwise (the caller's, or the platform's ``why``)
        self.why: tuple[str, str] | None = None  # the platform ended it: (code, message)
        self._ended = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()

    @property
    def id(self) -> str:
        return self.opening.id

    def touch(self) -> None:
        """Traffic, either way: the idle timeout starts again."""
        self._last = self._loop.time()

    def end(self, code: str, message: str) -> None:
        """End the session for the platform (``until_ended`` returns ``(code, message)``)."""
        if self.why is None:
            self.why, self.reason = (code, message), message
        self._ended.set()

    async def until_ended(self, *aws: Awaitable[Any]) -> tuple[str, str] | None:
        """Run ``aws`` (the relay's pumps) until the first of them returns (or raises: re-raised), or the platform
        ends the session (its ``why`` returned); the others are cancelled."""
        tasks = [asyncio.ensure_future(a) for a in aws]
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            done, _ = await asyncio.wait([*tasks, ended], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (*tasks, ended):
                t.cancel()
            await asyncio.gather(*tasks, ended, return_exceptions=True)
        for t in tasks:
            failure = t.exception() if t in done and not t.cancelled() else None
            if failure is not None:
                raise failure
        return self.why if ended in done else None

    async def keep(self, creds: Credentials, service: Any) -> None:
        """Refresh the row every ``REFRESH_SECONDS``; end the session when idle or when the caller may no longer."""
        next_refresh = self._loop.time() + REFRESH_SECONDS
        while True:
            now = self._loop.time()
            idle_at = self._last + self.idle_seconds
            if now >= idle_at:
                self.end(IDLE_CODE, f"no traffic either way for {self.idle_seconds:g} s: the session is closed "
                                    "(the master's idle_timeout_seconds, pai master --idle-timeout)")
                return
            if now >= next_refresh:
                next_refresh = now + REFRESH_SECONDS
                try:
                    await service(creds, _refresh, self.id)
                except PaiError as e:
                    if e.status in (401, 403, 404):
                        self.end(e.code, e.message)
                        return
                    log.warning("session refresh failed session=%s job=%s error=%s", self.id, self.task.ref.key, e)
                except Exception as e:  # the database away for a while: the session goes on
                    log.warning("session refresh failed session=%s job=%s error=%s", self.id, self.task.ref.key, e)
            await asyncio.sleep(max(0.0, min(idle_at, next_refresh) - self._loop.time()))


@contextlib.asynccontextmanager
async def interactive(request: web.Request, ref: TaskRef, *, kind: str, detail: str
                      ) -> AsyncIterator[InteractiveSession]:
    """Open a session of the request's caller in the running task ``ref`` (refusals as PaiErrors), keep it while the
    block runs, close it after (in the database, and an event in the job's history)."""
    creds, service, config = credentials(request), request.app[SERVICE], request.app[CONFIG]
    opening = Opening(uuid.uuid4().hex, kind, detail)
    started = time.monotonic()
    caller, task = await service(creds, _open, ref, opening, config.max_sessions_per_user)
    session = InteractiveSession(caller, task, opening, config.idle_timeout_seconds)
    log.info("interactive session opened session=%s kind=%s job=%s task=%s user=%s node=%s", opening.id, kind,
             ref.key, ref.name, caller, task.node)
    keeper = asyncio.create_task(session.keep(creds, service), name=f"session-{opening.id}")
    try:
        yield session
    except BaseException as e:
        broken = e.message if isinstance(e, PaiError) else f"broken off ({type(e).__name__})"
        session.reason = session.reason or broken
        raise
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper
        seconds = time.monotonic() - started
        closing = service(None, _close, caller, task, opening, session.exit_code, session.reason, seconds)
        try:
            await asyncio.shield(closing)
        except Exception as e:  # its row goes stale; the event is lost
            log.warning("session close failed session=%s job=%s error=%s", opening.id, ref.key, e)
        log.info("interactive session closed session=%s job=%s exit_code=%s reason=%s seconds=%.1f", opening.id,
                 ref.key, session.exit_code, session.reason, seconds)
