"""``GET {JOB}/tasks/{role}/{index}/exec?cmd=A&cmd=B...[&tty=1&rows=R&cols=C]``: a command in a running task, over a
WebSocket relayed verbatim to its node's agent (``/exec/{attempt_id}``, frames of ``pai.protocol.exec_frames``).

The session is opened first (``pai.rest_server.sessions``: the job's owner or an admin, the task running, the user's
limit, an event in the job's history), then the agent is reached, then the client's connection upgraded, so that
every refusal is a plain JSON answer: 400 ``InvalidParametersError`` (no ``cmd``, a bad size, not a WebSocket
request), 403, 404, 409 ``TaskNotRunningError`` (also when the agent no longer runs the attempt), 429
``TooManySessionsError``, 502 ``NodeUnavailableError`` (the agent does not answer). Frames go through unchanged both
ways, each one traffic for the idle timeout; the agent's ``exit`` frame gives the exit code recorded in the session's
end event. When the platform ends the session (idle, the caller's token revoked) the client gets an ``error`` frame
saying why, then the close; either side's close closes the other (the agent then kills the command).
"""

from __future__ import annotations

import contextlib
import shlex

from aiohttp import ClientError, ClientWebSocketResponse, WSMsgType, WSServerHandshakeError, web

from pai.domain.errors import InvalidParametersError, NodeUnavailableError, TaskNotRunningError
from pai.launcher.interactive import RunningTask
from pai.protocol import exec_frames as frames
from pai.rest_server.keys import AGENT_TOKEN, HTTP
from pai.rest_server.sessions import InteractiveSession, check_session, interactive, task_ref

HEARTBEAT_SECONDS = 30.0  # a client or agent gone without a word is noticed within this


def exec_query(request: web.Request) -> list[tuple[str, str]]:
    """The agent's query for this request (InvalidParametersError naming what is wrong)."""
    argv = tuple(request.query.getall(frames.Q_CMD, []))
    if not argv:
        raise InvalidParametersError("cmd is required: the command and its arguments, one cmd= each", field="cmd")
    tty = request.query.get(frames.Q_TTY, "0").lower()
    if tty not in ("0", "1", "false", "true", ""):
        raise InvalidParametersError("tty is 1 (a terminal) or 0", field="tty")
    try:
        rows = frames.terminal_size(request.query.get(frames.Q_ROWS), frames.DEFAULT_ROWS, frames.Q_ROWS)
        cols = frames.terminal_size(request.query.get(frames.Q_COLS), frames.DEFAULT_COLS, frames.Q_COLS)
    except frames.FrameError as e:
        raise InvalidParametersError(str(e)) from None
    return frames.exec_query(argv, tty in ("1", "true"), rows, cols)


async def exec_task(request: web.Request) -> web.StreamResponse:
    query, ref = exec_query(request), task_ref(request)
    client = web.WebSocketResponse(heartbeat=HEARTBEAT_SECONDS, max_msg_size=0)
    if not client.can_prepare(request).ok:  # what a session would be refused, else that this is no WebSocket
        await check_session(request, ref, kind="exec")
        raise InvalidParametersError("exec is a WebSocket: ask with Upgrade: websocket (pai exec does)")
    detail = shlex.join(v for k, v in query if k == frames.Q_CMD)
    async with interactive(request, ref, kind="exec", detail=detail) as session:
        agent = await _connect(request, session.task, query)
        async with agent:
            await client.prepare(request)
            why = await session.until_ended(_to_agent(client, agent, session), _to_client(agent, client, session))
            if why is not None:
                with contextlib.suppress(ConnectionError):
                    await client.send_str(frames.encode_control(frames.Error(*why)))
            elif session.exit_code is None:
                session.reason = "the client left" if client.closed else "the agent closed the connection"
        await client.close()
    return client


async def _connect(request: web.Request, task: RunningTask, query: list[tuple[str, str]]) -> ClientWebSocketResponse:
    url = f"http://{task.address}:{task.agent_port}/exec/{task.attempt_id}"
    headers = {"Authorization": f"Bearer {request.app[AGENT_TOKEN]}"}
    try:
        return await request.app[HTTP].ws_connect(url, params=query, headers=headers, heartbeat=HEARTBEAT_SECONDS,
                                                  max_msg_size=0)
    except WSServerHandshakeError as e:
        if e.status in (404, 409):
            raise TaskNotRunningError(f"task {task.ref.name} of job {task.ref.key} is not running on node "
                                      f"{task.node} (its agent answered {e.status})") from None
        if e.status == 400:
            raise InvalidParametersError(f"the agent of node {task.node} refused the command: {e.message}") from None
        raise NodeUnavailableError(f"the agent of node {task.node} refused exec: {e.status} {e.message}") from None
    except (ClientError, OSError, TimeoutError) as e:
        raise NodeUnavailableError(f"the agent of node {task.node} ({task.address}:{task.agent_port}) does not "
                                   f"answer: {e}") from None


async def _to_agent(client: web.WebSocketResponse, agent: ClientWebSocketResponse, session: InteractiveSession
                    ) -> None:
    """The client's frames, verbatim, until it closes (or the agent's side breaks)."""
    with contextlib.suppress(ConnectionError):
        async for msg in client:
            session.touch()
            if msg.type is WSMsgType.BINARY:
                await agent.send_bytes(msg.data)
            elif msg.type is WSMsgType.TEXT:
                await agent.send_str(msg.data)


async def _to_client(agent: ClientWebSocketResponse, client: web.WebSocketResponse, session: InteractiveSession
                     ) -> None:
    """The agent's frames, verbatim, until it closes (after the ``exit`` frame, whose code the session keeps), or the
    client's side breaks."""
    with contextlib.suppress(ConnectionError):
        async for msg in agent:
            session.touch()
            if msg.type is WSMsgType.BINARY:
                await client.send_bytes(msg.data)
            elif msg.type is WSMsgType.TEXT:
                session.exit_code = _exit_code(msg.data, session.exit_code)
                await client.send_str(msg.data)


def _exit_code(text: str, known: int | None) -> int | None:
    with contextlib.suppress(frames.FrameError):
        control = frames.decode_control(text)
        if isinstance(control, frames.Exit):
            return control.code
    return known
