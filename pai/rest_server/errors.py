"""One error middleware: every failure reaches the client as ``{code, message}``, never a traceback."""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from pai.domain.errors import PaiError

log = logging.getLogger("pai.rest")

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


def error_response(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message}, status=status)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except PaiError as e:
        if e.status >= 500:
            log.error("request failed path=%s code=%s message=%s", request.path, e.code, e.message)
        return error_response(e.status, e.code, e.message)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        code = _HTTP_CODES.get(e.status, "UnknownError")
        generic = not e.text or e.text.startswith(f"{e.status}:")
        message = f"{request.method} {request.path}: {e.reason}" if generic or not e.text else e.text
        return error_response(e.status, code, message)
    except Exception:
        log.exception("unhandled error path=%s method=%s", request.path, request.method)
        return error_response(500, "UnknownError", "internal error; the master's log has the details")
