"""ssh's ProxyCommand for ``pai ssh`` (``python -m pai.cli.sshproxy KEY --role R --index I [--master URL]``): stdin
and stdout through the master's tunnel to the task's ``ssh`` port, until either side ends.

ssh starts it for every connection, so it starts fast: the standard library only, no asyncio (a blocking
``pai.cli.wsclient`` and a thread for stdin), the master and token picked as every command picks them
(``pai.cli.config``). ``pai ssh --proxy`` runs the same.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading

from pai.cli.config import config_path, job_key, load_config, resolve_session
from pai.cli.errors import CliError
from pai.cli.urls import tunnel_path
from pai.cli.wsclient import BINARY, PING, TEXT, WebSocket, connect

SSH_LABEL = "ssh"
CHUNK = 64 * 1024
EOF_FRAME = json.dumps({"type": "eof"}).encode()
HEARTBEAT_SECONDS = 30.0  # a ping this often (the master's pings find a client gone; these keep the path warm)


def proxy(master: str, token: str | None, path: str) -> None:
    """stdin and stdout through the tunnel until the tunnel closes; stdin's EOF half-closes the task's side."""
    ws = connect(master + path, {"Authorization": f"Bearer {token}"} if token else {})
    done = threading.Event()
    threading.Thread(target=_to_tunnel, args=(ws,), name="stdin", daemon=True).start()
    threading.Thread(target=_ping, args=(ws, done), name="ping", daemon=True).start()
    try:
        while (frame := ws.receive()) is not None:
            if frame[0] == BINARY:
                _write_all(1, frame[1])
    except OSError:  # stdout closed: ssh is gone
        pass
    finally:
        done.set()
        ws.close()
    if ws.close_code not in (None, 1000):
        print(f"pai ssh: the master ended the session: {ws.close_reason or ws.close_code}", file=sys.stderr)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _to_tunnel(ws: WebSocket) -> None:
    try:
        while data := os.read(0, CHUNK):
            ws.send(BINARY, data)
        ws.send(TEXT, EOF_FRAME)
    except OSError:  # the tunnel closed: the receiving side ends too
        pass


def _ping(ws: WebSocket, done: threading.Event) -> None:
    while not done.wait(HEARTBEAT_SECONDS):
        try:
            ws.send(PING, b"")
        except OSError:
            return


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
        proxy(session.master, session.token, tunnel_path(job_key(args.name, session.user), args.role, args.index,
                                                         SSH_LABEL))
    except CliError as e:
        print(f"error: {e.render()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
