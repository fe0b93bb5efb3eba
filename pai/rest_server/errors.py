"""One error middleware: every failure reaches the client as ``{code, message}``, never a traceback.

Every request gets an id, sent back as the ``X-Request-Id`` header; a 500 names it in its message and in the
master's log. Input that a parser or the database refuses is the client's fault and answers 4xx, never 500; a
refused request changes nothing (each request is one transaction, rolled back on any error).
"""

from __future__ import annotations

import itertools
import logging
import os

from aiohttp import web
from aiohttp.typedefs import Handler
from sqlalchemy import exc as sa

from pai.domain.errors import InvalidParametersError, NoApiError, NotLeaderError, PaiError
from pai.rest_server.keys import CONFIG

log = logging.getLogger("pai.rest")

REQUEST_ID = web.RequestKey("request_id", str)
REQUEST_ID_HEADER = "X-Request-Id"
MAX_URL_BYTES = 8192  # the request target (path and query); longer: 414
MAX_HEADER_BYTES = 8192  # one header line (name and value); longer: 431
# aiohttp's own parser limit for a request line or a header (make_app's handler_args); it answers anything longer
# (and bytes that are not HTTP) with its plain-text 400 before any middleware runs.
PARSER_LINE_LIMIT = 65536


def _request_ids() -> itertools.count[int]:
    """Request ids: a count from a random start of this process's (16 hex digits; a forked worker starts its own).
    Unique, not secret: a random id per request was a getrandom(2) call on the event loop's thread, where the writer
    thread takes the GIL meanwhile (issue 29)."""
    return itertools.count(int.from_bytes(os.urandom(8)))


def _restart_ids() -> None:
    global _REQUEST_IDS
    _REQUEST_IDS = _request_ids()


_REQUEST_IDS = _request_ids()
os.register_at_fork(after_in_child=_restart_ids)

_HTTP_CODES = {
    400: "InvalidParametersError",
    401: "UnauthorizedUserError",
    403: "ForbiddenUserError",
    404: "NotFoundError",
    405: "MethodNotAllowedError",
    409: "ConflictError",
    413: "RequestTooLargeError",
    415: "UnsupportedMediaTypeError",
}


class UriTooLongError(InvalidParametersError):
    status = 414


class HeaderTooLargeError(InvalidParametersError):
    status = 431


def error_response(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message}, status=status)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_request_shape(request: web.Request) -> None:
    """URLs and headers past what the API needs are refused before any handler runs."""
    if len(request.raw_path) > MAX_URL_BYTES:
        raise UriTooLongError(
            f"URL: {len(request.raw_path)} bytes is longer than the maximum of {MAX_URL_BYTES}", field="URL"
        )
    for name, value in request.raw_headers:
        if len(name) + len(value) > MAX_HEADER_BYTES:
            header = _clip(name.decode("latin-1"), 64)
            raise HeaderTooLargeError(
                f"{header}: header of {len(name) + len(value)} bytes is larger than the maximum of {MAX_HEADER_BYTES}",
                field=header,
            )


def _http_error(request: web.Request, e: web.HTTPException) -> web.Response:
    if e.status == 413:
        limit = request.app[CONFIG].max_body_bytes
        return error_response(
            413, _HTTP_CODES[413], f"body: larger than the maximum of {limit} bytes (pai master --max-body-mb)"
        )
    if e.status in (404, 405) and request.path.startswith(("/api/", "/rest-server/api/")):  # OpenPAI: NoApiError
        methods = sorted(e.allowed_methods) if isinstance(e, web.HTTPMethodNotAllowed) else []
        allowed = f" (it takes {', '.join(methods)})" if methods else ""
        what = f"API {request.method} {_clip(request.path)}" if allowed else f"API {_clip(request.path)}"
        return error_response(e.status, NoApiError.code, f"{what} is not found{allowed}.")
    code = _HTTP_CODES.get(e.status, "InvalidParametersError" if e.status < 500 else "UnknownError")
    generic = not e.text or e.text.startswith(f"{e.status}:")
    message = f"{request.method} {_clip(request.path)}: {e.reason}" if generic else _clip(e.text or "", 1000)
    return error_response(e.status, code, message)


def _client_fault(request: web.Request, error: Exception) -> web.Response | None:
    """The 4xx for an error that only bad input causes (a parser's or the database's refusal), else None."""
    if isinstance(error, RecursionError):
        return error_response(400, "InvalidParametersError", "body: nested too deeply")
    if isinstance(error, UnicodeError):
        return error_response(400, "InvalidParametersError", "request: text that is not valid UTF-8")
    refused = isinstance(error, sa.DataError) or (
        isinstance(error, sa.StatementError) and isinstance(error.orig, OverflowError | ValueError)
    )
    if refused:
        log.warning("database refused a value request_id=%s path=%s error=%s", request[REQUEST_ID], request.path,
                    _clip(str(error).splitlines()[0]))
        message = "request: a value the database cannot store (a number out of range, a text too long or with NUL)"
        return error_response(400, "InvalidParametersError", message)
    if isinstance(error, sa.IntegrityError):
        log.warning("database conflict request_id=%s path=%s error=%s", request[REQUEST_ID], request.path,
                    _clip(str(error).splitlines()[0]))
        return error_response(409, "ConflictError", "request: conflicts with what is stored; try again")
    return None


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request[REQUEST_ID] = request_id = f"{next(_REQUEST_IDS) % 2**64:016x}"
    try:
        check_request_shape(request)
        return await handler(request)
    except PaiError as e:
        if e.status >= 500 and not isinstance(e, NotLeaderError):  # a standby's answer is no failure
            log.error("request failed request_id=%s path=%s code=%s message=%s", request_id, request.path, e.code,
                      e.message)
        return web.json_response(e.to_body(), status=e.status)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return _http_error(request, e)
    except Exception as e:
        answer = _client_fault(request, e)
        if answer is not None:
            return answer
        log.exception("unhandled error request_id=%s path=%s method=%s", request_id, request.path, request.method)
        return error_response(
            500, "UnknownError", f"internal error (request id {request_id}); the master's log has the details"
        )


async def add_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: every answer names its request."""
    request_id = request.get(REQUEST_ID)
    if request_id is not None:
        response.headers[REQUEST_ID_HEADER] = request_id
