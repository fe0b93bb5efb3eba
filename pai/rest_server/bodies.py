"""Request bodies: JSON objects, and the HTML-form bodies OpenPAI's clients also send (login, tokens, v1 jobs)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.errors import InvalidParametersError, InvalidProtocolError
from pai.jobspec.decode import load_json

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


async def json_body(request: web.Request, hint: str = "") -> dict[str, Any]:
    """The request's JSON object, read within the body limit and decoded with the job spec's bounds (depth,
    duplicate keys, numbers); anything else is a 400 naming ``body``."""
    wanted = f"body: must be a JSON object{' ' + hint if hint else ''}"
    raw = await request.read()
    try:
        body = load_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidParametersError(f"{wanted}; it is not UTF-8", field="body") from None
    except InvalidProtocolError as e:
        raise InvalidParametersError(f"{wanted}; {e.message.removeprefix('<root>: ')}", field="body") from None
    if not isinstance(body, dict):
        raise InvalidParametersError(wanted, field="body")
    return body



async def fields(request: web.Request, hint: str = "") -> dict[str, Any]:
    """The body's fields, from a JSON object or a form (OpenPAI's JS SDK and VS Code extension post forms to log in
    and to ask for a token). A form's values are strings; a field given twice is a 400 naming it."""
    if request.content_type not in FORM_TYPES:
        return await json_body(request, hint)
    form = await request.post()
    found: dict[str, Any] = {}
    for name in form:
        values = form.getall(name)
        if len(values) > 1:
            raise InvalidParametersError(f"{name}: given {len(values)} times; give it once", field=name)
        if not isinstance(values[0], str):
            raise InvalidParametersError(f"{name}: must be a text field, not a file", field=name)
        found[name] = values[0]
    return found
