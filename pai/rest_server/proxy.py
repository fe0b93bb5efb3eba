"""``/proxy/{user}~{job}/{role}/{index}/{label}/...``: a reverse proxy to a running task's labelled port (HTTP, every
method, streamed both ways; and WebSocket: ``pai.rest_server.proxy_ws``), for anyone who may read the job.

The path goes to the task UNCHANGED: an app serves under the prefix ``/proxy/{user}~{job}/{role}/{index}/{label}``
(TensorBoard ``--path_prefix``, Jupyter ``--ServerApp.base_url``; tasks get ``$PAI_PROXY_PREFIX`` without the label)
and is told it in ``X-Forwarded-Prefix``. ``Host`` stays what the client sent (Jupyter compares a WebSocket's
``Origin`` with it), with ``X-Forwarded-Host``, ``-Proto`` and ``-For``. Hop-by-hop headers are not relayed, and
neither is pai's credential: the ``Authorization`` header and the ``pai_proxy`` cookie never reach the task.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import ClientError, ClientResponse, ClientTimeout, web
from yarl import URL

from pai.domain.errors import PaiError, TaskPortUnreachableError
from pai.launcher.taskports import TaskPort
from pai.rest_server.keys import CONFIG, HTTP, SERVICE
from pai.rest_server.proxy_auth import COOKIE, proxy_credentials
from pai.rest_server.proxy_ws import is_websocket, relay_websocket
from pai.rest_server.taskports import port_address, proxied_port

log = logging.getLogger("pai.proxy")

CHUNK = 64 * 1024
CONNECT_SECONDS = 10.0
_TIMEOUT = ClientTimeout(total=None, sock_connect=CONNECT_SECONDS)
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "expect"})
_NOT_RELAYED = HOP_BY_HOP | {"authorization", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-prefix"}
# what aiohttp's client would add on its own: the client's own (or none) go instead
_AUTO_HEADERS = ("User-Agent", "Accept-Encoding", "Accept", "Content-Type")


class BodyTooLargeError(PaiError):
    code = "RequestTooLargeError"
    status = 413


def prefix_of(request: web.Request) -> str:
    """``/proxy/{key}/{role}/{index}/{label}`` as the client wrote it."""
    return "/".join(request.raw_path.partition("?")[0].split("/")[:6])


def _dropped(connection: list[str]) -> set[str]:
    """The headers that ``Connection`` headers name (hop-by-hop too)."""
    return {token.strip().lower() for value in connection for token in value.split(",")}


def _without_pai_cookie(value: str) -> str:
    kept = [part for part in value.split(";") if part.strip().partition("=")[0].strip() != COOKIE]
    return ";".join(kept).strip()


def upstream_headers(request: web.Request, *, websocket: bool = False) -> list[tuple[str, str]]:
    """What the task is sent: the client's headers but hop-by-hop ones and pai's credentials, with X-Forwarded-*."""
    drop = _NOT_RELAYED | _dropped(request.headers.getall("Connection", []))
    out: list[tuple[str, str]] = []
    for name, value in request.headers.items():
        lower = name.lower()
        if lower in drop or lower == "x-forwarded-for" or (websocket and lower.startswith("sec-websocket-")):
            continue
        if lower == "cookie":
            value = _without_pai_cookie(value)
            if not value:
                continue
        out.append((name, value))
    forwarded_for = ", ".join(v for v in (request.headers.get("X-Forwarded-For"), request.remote) if v)
    if forwarded_for:
        out.append(("X-Forwarded-For", forwarded_for))
    out += [("X-Forwarded-Host", request.host), ("X-Forwarded-Proto", request.scheme),
            ("X-Forwarded-Prefix", prefix_of(request))]
    return out


def upstream_url(target: TaskPort, request: web.Request) -> URL:
    host = f"[{target.address}]" if ":" in target.address else target.address
    return URL(f"http://{host}:{target.port}{request.raw_path}", encoded=True)


async def _limited(request: web.Request, limit: int) -> AsyncIterator[bytes]:
    seen = 0
    async for chunk in request.content.iter_chunked(CHUNK):
        seen += len(chunk)
        if seen > limit:
            raise BodyTooLargeError(_too_large(limit))
        yield chunk


def _too_large(limit: int) -> str:
    return f"body: larger than the maximum of {limit} bytes for a task's port (pai master --proxy-max-body-mb)"


async def proxy(request: web.Request) -> web.StreamResponse:
    creds = proxy_credentials(request)
    target = await request.app[SERVICE](creds, proxied_port, port_address(request))
    limit = request.app[CONFIG].proxy_max_body_bytes
    if is_websocket(request):
        return await relay_websocket(request, upstream_url(target, request), upstream_headers(request, websocket=True),
                                     target, limit)
    length = request.content_length
    if length is not None and length > limit:
        raise BodyTooLargeError(_too_large(limit))
    body = _limited(request, limit) if request.body_exists else None
    try:
        upstream = await request.app[HTTP].request(
            request.method, upstream_url(target, request), headers=upstream_headers(request), data=body,
            allow_redirects=False, auto_decompress=False, skip_auto_headers=_AUTO_HEADERS,
            timeout=_TIMEOUT)
    except ClientError as e:
        cause = e.__cause__ or e.__context__
        if isinstance(cause, BodyTooLargeError):
            raise cause from None
        raise unreachable(target, e) from None
    async with upstream:
        drop = HOP_BY_HOP | _dropped(upstream.headers.getall("Connection", []))
        headers = [(name, value) for name, value in upstream.headers.items() if name.lower() not in drop]
        if _small(request, upstream):  # read whole, sent in one write with its headers
            try:
                return web.Response(status=upstream.status, reason=upstream.reason, headers=headers,
                                    body=await upstream.read())
            except (ClientError, ConnectionError) as e:  # nothing sent yet: the client is told
                raise unreachable(target, e) from None
        resp = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        resp.headers.extend(headers)
        await resp.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await resp.write(chunk)
        except (ClientError, ConnectionError) as e:  # the answer is half sent: the client must see it broken
            log.warning("proxied answer broke off job=%s task=%s label=%s error=%s", target.key, target.task,
                        target.label, e)
            if request.transport is not None:
                request.transport.abort()
            return resp
        await resp.write_eof()
    return resp


def _small(request: web.Request, upstream: ClientResponse) -> bool:
    """An answer with a body of a known length of at most ``CHUNK`` bytes (a page, a JSON document): streaming it
    would only cost a write for its headers and one for its end."""
    length = upstream.content_length
    return (length is not None and 0 < length <= CHUNK and request.method != "HEAD"
            and upstream.status not in (204, 304) and upstream.status >= 200)


def unreachable(target: TaskPort, error: BaseException) -> TaskPortUnreachableError:
    return TaskPortUnreachableError(f"port {target.label} ({target.address}:{target.port}) of task {target.task} of "
                                    f"job {target.key} did not answer: {error}")
