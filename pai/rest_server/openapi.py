"""The OpenAPI document of the public API (``job_schemas/openapi.yaml``), served as JSON at
``GET /api/v2/openapi.json`` (no token, as OpenPAI serves its swagger).

Loaded once: ``info.version`` becomes the master's version, and each ``{"x-embed": FILE}`` schema becomes that JSON
Schema file of ``job_schemas/`` (the job protocols, the VC configuration, the user API's bodies), its internal
references rewritten to point into the document, so that the document is whole and the schemas are not typed twice.
tests/rest_server/test_openapi.py keeps it true to the route table and the handlers.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import yaml
from aiohttp import web

from pai.version import __version__

DOCUMENT = "openapi.yaml"


def _embedded(schema: Any, pointer: str) -> Any:
    """``schema`` (a JSON Schema file) as a part of the document at ``pointer``: ``#/...`` references rebased, and
    without the keys that would make it a resource of its own."""
    if isinstance(schema, dict):
        out = {k: _embedded(v, pointer) for k, v in schema.items() if k not in ("$id", "$schema")}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            out["$ref"] = pointer + ref[1:]
        return out
    if isinstance(schema, list):
        return [_embedded(v, pointer) for v in schema]
    return schema


@cache
def document() -> dict[str, Any]:
    """The whole document (do not change it: it is shared)."""
    files = resources.files("job_schemas")
    doc: dict[str, Any] = yaml.safe_load(files.joinpath(DOCUMENT).read_text(encoding="utf-8"))
    doc["info"]["version"] = __version__
    schemas = doc["components"]["schemas"]
    for name, schema in schemas.items():
        if isinstance(schema, dict) and "x-embed" in schema:
            text = files.joinpath(schema["x-embed"]).read_text(encoding="utf-8")
            schemas[name] = _embedded(json.loads(text), f"#/components/schemas/{name}")
    return doc


@cache
def _document_json() -> bytes:
    return json.dumps(document()).encode()


async def openapi_json(request: web.Request) -> web.Response:
    """``GET /api/v2/openapi.json``."""
    return web.Response(body=_document_json(), content_type="application/json")
