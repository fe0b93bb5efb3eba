"""Into a running task's labelled port: who may, and where it is (the operations of the tunnel and the proxy).

The proxy serves anyone who may read the job; a tunnel only the job's owner and admins, and each tunnel is an event
in the job's history when it opens and when it closes (who, which port, for how long, how many bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from pai.domain.errors import InvalidParametersError
from pai.launcher.access import owner_of, require_owner_or_admin
from pai.launcher.taskports import TaskPort, locate_port
from pai.rest_server.jobs import reader
from pai.rest_server.service import Context, anonymous, reads, writes
from pai.store import history


@dataclass(frozen=True, slots=True)
class PortAddress:
    """A task's port as a request names it."""

    key: str
    role: str
    index: int
    label: str


def port_address(request: web.Request) -> PortAddress:
    """``{key}/.../{role}/{index}/.../{label}`` of the request's path; 400 for an index that is no integer."""
    found = request.match_info
    raw = found["index"]
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise InvalidParametersError(f"index: {raw[:20]!r} is not a task index (0, 1, ...)", field="index")
    return PortAddress(found["key"], found["role"], int(raw), found["label"])


@reads
def proxied_port(c: Context, at: PortAddress) -> TaskPort:
    """Where the proxy sends a request: for anyone who may read the job."""
    reader(c, [owner_of(at.key)])
    with c.db.session() as s:
        return locate_port(s, at.key, at.role, at.index, at.label)


@dataclass(frozen=True, slots=True)
class Tunnel:
    """An opened tunnel: where to, and for whom."""

    target: TaskPort
    user: str


@writes()
def open_tunnel(c: Context, at: PortAddress) -> Tunnel:
    """A tunnel to the port, for the job's owner or an admin (any other reader: 403); its ``tunnel-opened`` event."""
    reader(c, [owner_of(at.key)])
    require_owner_or_admin(c.user, owner_of(at.key), "open tunnels into")
    with c.db.session() as s:
        target = locate_port(s, at.key, at.role, at.index, at.label)
        who = c.user.name
        history.add_event(s, target.job_id, c.launcher.clock(), "tunnel-opened",
                          f"{who} opened a tunnel to port {target.label} ({target.port}) of {target.task}",
                          {"user": who, "role": target.role, "index": target.index, "label": target.label,
                           "port": target.port, "attemptId": target.attempt_id})
    return Tunnel(target, who)


@anonymous(writes=True)  # the tunnel was authorised when it opened: its end is recorded whatever its token is now
def close_tunnel(c: Context, tunnel: Tunnel, seconds: float, sent: int, received: int, reason: str) -> None:
    """The tunnel's ``tunnel-closed`` event: how long it was open, the bytes each way, why it ended."""
    t = tunnel.target
    with c.db.session() as s:
        history.add_event(s, t.job_id, c.launcher.clock(), "tunnel-closed",
                          f"{tunnel.user}'s tunnel to port {t.label} ({t.port}) of {t.task} closed after "
                          f"{seconds:.1f}s: {reason}",
                          {"user": tunnel.user, "role": t.role, "index": t.index, "label": t.label, "port": t.port,
                           "attemptId": t.attempt_id, "seconds": round(seconds, 3), "bytesToTask": sent,
                           "bytesFromTask": received, "reason": reason})
