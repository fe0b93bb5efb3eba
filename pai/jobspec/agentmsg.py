"""What the master accepts from agents, checked against ``job_schemas/agent-messages.json`` before it is decoded,
so that a malformed register or heartbeat is a 400 naming the field and the rule, never a 500."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from pai.domain.errors import InvalidParametersError
from pai.jobspec.schema import describe

Kind = Literal["register", "heartbeat"]


@cache
def _validator(kind: Kind) -> Draft202012Validator:
    schema: dict[str, Any] = json.loads(resources.files("job_schemas").joinpath("agent-messages.json").read_text())
    return Draft202012Validator({**schema, "$ref": f"#/$defs/{kind}"})


def check_agent_message(doc: Any, kind: Kind) -> dict[str, Any]:
    """``doc`` when it is a well-formed ``kind`` message; else InvalidParametersError naming the field."""
    error = best_match(_validator(kind).iter_errors(doc))
    if error is not None:
        field, rule = describe(error)
        path = field or "<root>"
        raise InvalidParametersError(f"{kind}: {path}: {rule}", field=path)
    assert isinstance(doc, dict)
    return doc
