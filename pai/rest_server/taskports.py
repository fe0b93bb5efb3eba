"""Into a running task's labelled port: who may, and where it is (the operations of the tunnel and the proxy).

The proxy serves anyone who may read the job; a tunnel only the job's owner and admins, as an interactive session
(``pai.rest_server.sessions``: the user's limit, the idle timeout, an event in the job's history when it starts and
when it ends).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from pai.domain.errors import InvalidParametersError
from pai.launcher.access import owner_of, require_owner_or_admin
from pai.launcher.taskports import TaskPort, locate_port
from pai.rest_server.jobs import reader
from pai.rest_server.service import Context, reads


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


def _may_read(c: Context, owner: str) -> None:
    """``reader``'s check, reading the cluster's rule only where it matters (the proxy asks on every request: its
    owner's and admins' requests save that query)."""
    if not (c.user.admin or c.user.name == owner):
        reader(c, [owner])


@reads
def proxied_port(c: Context, at: PortAddress) -> TaskPort:
    """Where the proxy sends a request: for anyone who may read the job."""
    _may_read(c, owner_of(at.key))
    with c.db.session() as s:
        return locate_port(s, at.key, at.role, at.index, at.label)


@reads
def tunnel_port(c: Context, at: PortAddress) -> TaskPort:
    """Where a tunnel goes, for the job's owner or an admin (any other reader: 403): asked before its session opens,
    so that a label the task does not have is a 404 naming the ones it has, and opens nothing."""
    reader(c, [owner_of(at.key)])
    require_owner_or_admin(c.user, owner_of(at.key), "open tunnel sessions in")
    with c.db.session() as s:
        return locate_port(s, at.key, at.role, at.index, at.label)
