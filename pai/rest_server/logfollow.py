"""Following a task's log across its attempts: ``GET {JOB}/tasks/{role}/{index}/logs/{stream}?follow=true[&tail=N]
[&since=T]``.

The answer is chunked text/plain: the task's output as its node's agent serves it while it is written
(``pai.nodeagent.logfollow``), attempt after attempt, with a line ``==> attempt N of role[i] on node X <==`` before
each attempt but the first shown; it ends when the task has ended (``pai.launcher.logs.task_ended``: its last attempt
ended and its job will start no other). ``tail``: only the last N bytes of the first attempt shown. Logs carry no time
per line, so ``since`` picks attempts, not lines: those that ran at T or later (still running, or ended at T or
after), each whole; T is seconds before now, or an ISO 8601 time. Without it, the follow starts at the latest
attempt.

Each look at the task (every ``POLL_SECONDS`` while it waits for an attempt) is a read through the service facade:
a reader who may no longer read the job, or a job deleted meanwhile, ends the answer with a line saying why and a
broken connection (so a client can tell it from an ended task).
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from aiohttp import ClientError, ClientTimeout, web

from pai.domain.errors import InvalidParametersError, PaiError
from pai.launcher.access import owner_of
from pai.launcher.logs import LogLocation, TaskLogs, task_logs
from pai.rest_server import jobs
from pai.rest_server.jobs import int_param, key_of, reader
from pai.rest_server.keys import AGENT_TOKEN, HTTP, SERVICE
from pai.rest_server.service import Context, credentials, reads

POLL_SECONDS = 0.5
_TRIES = 3  # an ended attempt whose agent does not answer: asked this many times
_AGENT_TIMEOUT = ClientTimeout(total=None, sock_connect=10, sock_read=None)


@reads
def _task_logs(c: Context, key: str, role: str, index: int) -> TaskLogs:
    reader(c, [owner_of(key)])
    return task_logs(c.db, key, role, index)


def task_index(request: web.Request) -> int:
    try:
        return int(request.match_info["index"])
    except ValueError:
        raise InvalidParametersError("index: must be an integer", field="index") from None


def parse_since(raw: str | None, now: float) -> float | None:
    """``since``: seconds before ``now``, or an ISO 8601 time (UTC unless it says); None when absent."""
    if not raw:
        return None
    try:
        return now - float(raw) if raw.replace(".", "", 1).isdigit() else datetime.fromisoformat(raw).timestamp()
    except ValueError:
        raise InvalidParametersError(f"since: {raw[:40]!r} is neither a number of seconds nor an ISO 8601 time",
                                     field="since") from None


async def task_log(request: web.Request) -> web.StreamResponse:
    """The task's log: followed with ``follow=true``, else read once (``pai.rest_server.jobs.task_log``)."""
    if request.query.get("follow", "").lower() not in ("true", "1"):
        return await jobs.task_log(request)
    return await _Follow(request).run()


class _Follow:
    def __init__(self, request: web.Request) -> None:
        self.request, self.creds = request, credentials(request)
        self.key, self.role, self.index = key_of(request), request.match_info["role"], task_index(request)
        self.stream = request.match_info["stream"]
        self.tail = int_param(request, "tail", None)
        self.since = parse_since(request.query.get("since"), time.time())
        self.response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})

    async def look(self) -> TaskLogs:
        return await self.request.app[SERVICE](self.creds, _task_logs, self.key, self.role, self.index)

    async def run(self) -> web.StreamResponse:
        view = await self.look()  # refusals (403, 404) before the answer starts
        self.response.enable_chunked_encoding()
        await self.response.prepare(self.request)
        try:
            await self._attempts(view)
        except PaiError as e:
            await self.response.write(f"==> {e.message} <==\n".encode())
            if self.request.transport is not None:  # no end: the client sees a broken answer
                self.request.transport.close()
            return self.response
        await self.response.write_eof()
        return self.response

    async def _attempts(self, view: TaskLogs) -> None:
        done: set[str] = set()
        if self.since is None and view.attempts:  # from the latest attempt on
            done.update(a.attempt_id for a in view.attempts[:-1])
        shown = 0
        while True:
            since = self.since
            todo = [a for a in view.attempts if a.attempt_id not in done
                    and (since is None or a.finished_at is None or a.finished_at >= since)]
            if todo:
                place = todo[0]
                if shown:
                    await self.response.write(f"==> attempt {place.number} of {self.role}[{self.index}] on node "
                                              f"{place.node} <==\n".encode())
                await self._relay(place, self.tail if not shown else None)
                done.add(place.attempt_id)
                shown += 1
            elif view.ended:
                return
            else:
                await asyncio.sleep(POLL_SECONDS)
            view = await self.look()

    async def _relay(self, place: LogLocation, tail: int | None) -> None:
        """One attempt's log, as its agent serves it, until it ended there and here (the agent's answer may end before
        the master hears of the end, or break: it is asked again from where it got to). An attempt that ended while
        its agent does not answer is given up after ``_TRIES`` tries, with a line saying so."""
        url = f"http://{place.address}:{place.port}/logs/{place.attempt_id}/{self.stream}"
        headers = {"Authorization": f"Bearer {self.request.app[AGENT_TOKEN]}"}
        offset: int | None = None
        failed = 0
        while True:
            params = {"follow": "1"} | ({"offset": str(offset)} if offset is not None
                                       else {"tail": str(tail)} if tail is not None else {})
            answered = False
            try:
                async with self.request.app[HTTP].get(url, params=params, headers=headers,
                                                      timeout=_AGENT_TIMEOUT) as resp:
                    if resp.status == 200:
                        offset = int(resp.headers.get("X-Log-Offset", "0"))
                        async for chunk in resp.content.iter_any():
                            await self.response.write(chunk)
                            offset += len(chunk)
                        answered = True
            except (ClientError, TimeoutError, ValueError):
                pass  # the agent is away (restarting, or its node lost)
            failed = 0 if answered else failed + 1
            now = next((a for a in (await self.look()).attempts if a.attempt_id == place.attempt_id), None)
            if now is None or (now.finished_at is not None and answered):
                return
            if now.finished_at is not None and failed >= _TRIES:
                await self.response.write(f"==> node {place.node} did not answer for the rest of attempt "
                                          f"{place.number} <==\n".encode())
                return
            await asyncio.sleep(POLL_SECONDS)
