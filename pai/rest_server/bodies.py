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
    return decode_json(await request.read(), hint)


def decode_json(raw: bytes, hint: str = "") -> dict[str, Any]:
    """``json_body``'s decoding of a body already read (in an operation: after the caller's check, as before)."""
    wanted = f"body: must be a JSON object{' ' + hint if hint else ''}"
    try:
        body = load_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidParametersError(f"{wanted}; it is not UTF-8", field="body") from None
    except InvalidProtocolError as e:
        raise InvalidParametersError(f"{wanted}; {e.message.removeprefix('<root>: ')}", field="body") from None
    if not isinstance(body, dict):
        raise InvalidParametersError(wanted, field="body")
    return body


async def form_pairs(request: web.Request) -> list[tuple[str, str]]:
    """A form body's fields in order (a field may come more than once); a body that is not a valid form, or a
    field that is a file, is a 400 naming it."""
    try:
        form = await request.post()
    except ValueError as e:  # e.g. multipart/form-data without a boundary
        raise InvalidParametersError(f"body: not a valid {request.content_type} body: {e}", field="body") from None
    pairs: list[tuple[str, str]] = []
    for name, value in form.items():
        if not isinstance(value, str):
            raise InvalidParametersError(f"{name}: must be a text field, not a file", field=name)
        pairs.append((name, value))
    return pairs


async def fields(request: web.Request, hint: str = "") -> dict[str, Any]:
    """The body's fields, from a JSON object or a form (OpenPAI's JS SDK and VS Code extension post forms to log in
    and to ask for a token). A form's values are strings; a field given twice is a 400 naming it."""
    if request.content_type not in FORM_TYPES:
        return await json_body(request, hint)
    found: dict[str, Any] = {}
    for name, value in await form_pairs(request):
        if name in found:
            raise InvalidParametersError(f"{name}: given more than once; give it once", field=name)
        found[name] = value
    return found
