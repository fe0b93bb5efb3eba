"""What the master accepts from agents, checked against ``job_schemas/agent-messages.json`` before it is decoded,
so that a malformed register or heartbeat is a 400 naming the field and the rule, never a 500.

Every heartbeat is checked, a thousand a second on a large cluster, so the check is the schema compiled to Python
(fastjsonschema; what it saves: docs/architecture.md); only a message it rejects goes through jsonschema,
whose errors name the field and the rule the way every other 400 of the API does, and which has the last word."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any, Literal

import fastjsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from pai.domain.errors import InvalidParametersError
from pai.jobspec.schema import describe

Kind = Literal["register", "heartbeat"]


def _schema(kind: Kind) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(resources.files("job_schemas").joinpath("agent-messages.json").read_text())
    return {**schema, "$ref": f"#/$defs/{kind}"}


@cache
def _validator(kind: Kind) -> Draft202012Validator:
    return Draft202012Validator(_schema(kind))


@cache
def _compiled(kind: Kind) -> Callable[[Any], Any]:
    return fastjsonschema.compile(_schema(kind))


def check_agent_message(doc: Any, kind: Kind) -> dict[str, Any]:
    """``doc`` when it is a well-formed ``kind`` message; else InvalidParametersError naming the field."""
    try:
        _compiled(kind)(doc)
    except fastjsonschema.JsonSchemaException:
        pass  # jsonschema says where and why (and decides)
    else:
        assert isinstance(doc, dict)
        return doc
    error = best_match(_validator(kind).iter_errors(doc))
    if error is not None:
        field, rule = describe(error)
        path = field or "<root>"
        raise InvalidParametersError(f"{kind}: {path}: {rule}", field=path)
    assert isinstance(doc, dict)
    return doc
