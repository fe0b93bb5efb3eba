"""ssh's ProxyCommand for ``pai ssh`` (``python -m pai.cli.sshproxy KEY --role R --index I [--master URL]``): stdin
and stdout through the master's tunnel to the task's ``ssh`` port, until either side ends.

ssh starts it for every connection, so it starts fast: the standard library only (argparse, asyncio and
``pai.cli.wsclient``), the master and token picked as every command picks them (``pai.cli.config``). ``pai ssh
--proxy`` runs the same.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys

from pai.cli.config import config_path, job_key, load_config, resolve_session
from pai.cli.errors import CliError
from pai.cli.urls import tunnel_path
from pai.cli.wsclient import BINARY, TEXT, WebSocket, connect

SSH_LABEL = "ssh"
CHUNK = 64 * 1024
EOF_FRAME = json.dumps({"type": "eof"}).encode()
HEARTBEAT_SECONDS = 30.0  # a ping this often (the master's pings find a client gone; these, a master gone)


async def proxy(master: str, token: str | None, path: str) -> None:
    """stdin and stdout through the tunnel until the tunnel closes; stdin's EOF half-closes the task's side."""
    ws = await connect(master + path, {"Authorization": f"Bearer {token}"} if token else {})
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(1, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    sending = asyncio.ensure_future(_to_tunnel(reader, ws))
    try:
        while (frame := await ws.receive()) is not None:
            if frame[0] == BINARY:
                writer.write(frame[1])
                await writer.drain()
    finally:
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sending
        await ws.close()
        writer.close()
    if ws.close_code not in (None, 1000):
        print(f"pai ssh: the master ended the session: {ws.close_reason or ws.close_code}", file=sys.stderr)


async def _to_tunnel(reader: asyncio.StreamReader, ws: WebSocket) -> None:
    pinging = asyncio.ensure_future(_ping(ws))
    try:
        while data := await reader.read(CHUNK):
            await ws.send(BINARY, data)
        await ws.send(TEXT, EOF_FRAME)
    finally:
        pinging.cancel()


async def _ping(ws: WebSocket) -> None:
    while True:
        await asyncio.sleep(HEARTBEAT_SECONDS)
        await ws.send(0x9, b"")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pai ssh", description="ssh's ProxyCommand: stdin and stdout through the "
                                     "master's tunnel to a task's ssh port")
    parser.add_argument("name")
    parser.add_argument("--role", required=True)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--proxy", action="store_true", help="(accepted: this command is always the proxy)")
    parser.add_argument("--master", default=os.environ.get("PAI_MASTER_URL") or None)
    args = parser.parse_args(argv)
    try:
        session = resolve_session(args.master, os.environ, load_config(config_path(os.environ)))
        path = tunnel_path(job_key(args.name, session.user), args.role, args.index, SSH_LABEL)
        asyncio.run(proxy(session.master, session.token, path))
    except CliError as e:
        print(f"error: {e.render()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
