"""``GET /exec/{attempt_id}?cmd=A&cmd=B...[&tty=1&rows=R&cols=C]``: a command in a running attempt, over a WebSocket.

Only the master comes in (the agent token, ``pai.nodeagent.agentauth``); it relays the frames of
``pai.protocol.exec_frames`` verbatim between the user and here. Refusals come before the upgrade, as JSON
``{code, message}``: 401 without the token, 400 ``InvalidParametersError`` (no ``cmd``, a bad size), 404
``NoTaskError`` (no such attempt on this node), 409 ``TaskNotRunningError``. Then the runtime's
:class:`~pai.nodeagent.taskexec.ExecSession` is pumped both ways until the command ends (its ``exit`` frame is the
last, then the close) or the connection does: either way the session is killed, so that nothing of it stays on
the node (also when the agent shuts down, which closes every exec's connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping

from aiohttp import WSCloseCode, WSMsgType, web

from pai.domain.errors import InvalidParametersError, NoTaskError, TaskNotRunningError, UnauthorizedUserError
from pai.nodeagent.agentauth import authorised, error, refuse
from pai.nodeagent.logfmt import BoundLogger, bind
from pai.nodeagent.paths import is_attempt_id
from pai.nodeagent.runtime import Runtime
from pai.nodeagent.taskexec import AttemptNotRunning, ExecRequest, ExecSession, NoSuchAttempt
from pai.protocol import exec_frames as frames

HEARTBEAT_SECONDS = 30.0  # a peer gone without a word (a cut cable) is noticed within this
_RUNTIME: web.AppKey[Runtime] = web.AppKey("exec_runtime")
_LOG = web.AppKey("exec_log", BoundLogger)
_OPEN: web.AppKey[set[web.WebSocketResponse]] = web.AppKey("exec_open")


def add_routes(app: web.Application, runtime: Runtime, log: BoundLogger | None = None) -> None:
    app[_RUNTIME] = runtime
    app[_LOG] = log or bind(logging.getLogger("pai.nodeagent.exec"))
    app[_OPEN] = set()
    app.router.add_get("/exec/{attempt_id}", _exec)
    app.on_shutdown.append(_close_all)


def exec_request(query: Mapping[str, str], argv: list[str]) -> ExecRequest:
    """The request of an upgrade's query (``argv``: its ``cmd`` values); InvalidParametersError naming the field."""
    if not argv:
        raise InvalidParametersError("cmd is required: the command and its arguments, one cmd= each", field="cmd")
    tty = query.get(frames.Q_TTY, "0").lower()
    if tty not in ("0", "1", "false", "true", ""):
        raise InvalidParametersError("tty is 1 (a terminal) or 0", field="tty")
    try:
        rows = frames.terminal_size(query.get(frames.Q_ROWS), frames.DEFAULT_ROWS, frames.Q_ROWS)
        cols = frames.terminal_size(query.get(frames.Q_COLS), frames.DEFAULT_COLS, frames.Q_COLS)
    except frames.FrameError as e:
        raise InvalidParametersError(str(e)) from e
    return ExecRequest(tuple(argv), tty=tty in ("1", "true"), rows=rows, cols=cols)


async def _exec(request: web.Request) -> web.StreamResponse:
    if not authorised(request):
        return refuse(UnauthorizedUserError("exec is for the master only: go through its API"))
    attempt_id = request.match_info["attempt_id"]
    if not is_attempt_id(attempt_id):
        return error(400, InvalidParametersError.code, "the attempt id is not a plain token")
    try:
        req = exec_request(request.query, request.query.getall(frames.Q_CMD, []))
    except InvalidParametersError as e:
        return refuse(e)
    log = request.app[_LOG].bind(attempt=attempt_id, job=_job_of(request.app[_RUNTIME], attempt_id))
    try:
        session = await request.app[_RUNTIME].exec(attempt_id, req)
    except NoSuchAttempt as e:
        return refuse(NoTaskError(e.message))
    except AttemptNotRunning as e:
        return refuse(TaskNotRunningError(e.message))
    except Exception as e:  # the engine refused, or is down: the node's trouble
        log.exception("exec failed to start")
        return error(500, "UnknownError", f"exec could not start: {e}")
    started = time.monotonic()
    log.info("exec session started", extra={"cmd": " ".join(req.argv)[:200], "tty": req.tty})
    code = None
    ws = web.WebSocketResponse(heartbeat=HEARTBEAT_SECONDS)
    request.app[_OPEN].add(ws)
    try:
        await ws.prepare(request)
        code = await _relay(ws, session)
    finally:
        request.app[_OPEN].discard(ws)
        await session.kill()  # the command ended, or its client left: nothing of the session stays
        await ws.close()
        log.info("exec session ended", extra={"exit_code": code, "client_left": code is None,
                                              "seconds": round(time.monotonic() - started, 3)})
    return ws


async def _relay(ws: web.WebSocketResponse, session: ExecSession) -> int | None:
    """Pump both ways; the exit code once the command ended and the client was told, None when the client left."""
    output = asyncio.create_task(_output(ws, session))
    inputs = asyncio.create_task(_input(ws, session))
    try:
        done, _ = await asyncio.wait((output, inputs), return_when=asyncio.FIRST_COMPLETED)
        return output.result() if output in done and output.exception() is None else None
    finally:
        for task in (output, inputs):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await task


async def _output(ws: web.WebSocketResponse, session: ExecSession) -> int:
    while (chunk := await session.read()) is not None:
        await ws.send_bytes(frames.encode_output(*chunk))
    code = await session.wait()
    await ws.send_str(frames.encode_control(frames.Exit(code)))
    return code


async def _input(ws: web.WebSocketResponse, session: ExecSession) -> None:
    """Until the client closes or the connection drops."""
    async for msg in ws:
        if msg.type is WSMsgType.BINARY:
            await session.write(msg.data)
        elif msg.type is WSMsgType.TEXT:
            try:
                control = frames.decode_control(msg.data)
            except frames.FrameError as e:
                await ws.send_str(frames.encode_control(frames.Error(InvalidParametersError.code, str(e))))
                continue
            if isinstance(control, frames.Resize):
                await session.resize(control.rows, control.cols)
            elif isinstance(control, frames.Eof):
                await session.close_stdin()
            else:
                await ws.send_str(frames.encode_control(frames.Error(
                    InvalidParametersError.code, "a client sends stdin, resize or eof")))
        else:  # ERROR: the connection broke
            return


def _job_of(runtime: Runtime, attempt_id: str) -> str | None:
    return next((r.job_key for r in runtime.reports() if r.attempt_id == attempt_id), None)


async def _close_all(app: web.Application) -> None:
    sockets: set[web.WebSocketResponse] = app[_OPEN]
    for ws in list(sockets):
        await ws.close(code=WSCloseCode.GOING_AWAY, message=b"the node agent is shutting down")
