"""The JSON Schemas of ``job_schemas/`` and the one error a user sees when a spec breaks them."""

from __future__ import annotations

import json
import re
from enum import IntEnum
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from pai.domain.errors import InvalidProtocolError
from pai.jobspec.paths import format_path, join_path


class ProtocolVersion(IntEnum):
    V1 = 1
    V2 = 2

    @property
    def schema_file(self) -> str:
        return f"v{self.value}.json"

    @classmethod
    def of(cls, config: dict[str, Any], from_json: bool) -> ProtocolVersion:
        """v2 when the spec says ``protocolVersion``; v1 when it has a ``jobName`` or came as JSON."""
        if "protocolVersion" in config:
            return cls.V2
        if "jobName" in config or from_json:
            return cls.V1
        return cls.V2


@cache
def load_schema(version: ProtocolVersion) -> dict[str, Any]:
    text = resources.files("job_schemas").joinpath(version.schema_file).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _validator(version: ProtocolVersion) -> Draft202012Validator:
    return Draft202012Validator(load_schema(version))


def validate(config: dict[str, Any], version: ProtocolVersion) -> None:
    """Raise :class:`InvalidProtocolError` for the most relevant schema violation of ``config``."""
    errors = list(_validator(version).iter_errors(config))
    # A property an if/then branch rejects also counts as "unevaluated"; report the branch's own error.
    errors = [e for e in errors if e.validator != "unevaluatedProperties"] or errors
    error = best_match(errors)
    if error is not None:
        field, rule = describe(error)
        raise InvalidProtocolError(f"{field or '<root>'}: {rule}", field=field)


def describe(error: ValidationError) -> tuple[str, str]:
    """The field path an error is about and the rule it breaks, in words."""
    path = format_path(error.absolute_path)
    instance: Any = error.instance
    value: Any = error.validator_value
    match error.validator:
        case "required":
            missing = next((p for p in value if p not in instance), "")
            return join_path(path, missing), "is required"
        case "additionalProperties" | "unevaluatedProperties":
            extra = _unexpected(error)
            return join_path(path, extra), "additional property is not allowed"
        case "pattern":
            if "propertyNames" in error.schema_path:
                return join_path(path, str(instance)), f"name {instance!r} does not match {value}"
            rule = error.schema.get("x-rule") if isinstance(error.schema, dict) else None
            return path, f"{_short(instance)} is not {rule}" if rule else f"{_short(instance)} does not match {value}"
        case "minItems":
            return path, f"must have at least {value} item{'s' if value != 1 else ''}"
        case "minProperties":
            return path, f"must have at least {value} entr{'ies' if value != 1 else 'y'}"
        case "maxLength":
            if "propertyNames" in error.schema_path:
                return join_path(path, str(instance)), f"name is longer than {value} characters"
            return path, f"is longer than {value} characters"
        case "type":
            types = [value] if isinstance(value, str) else list(value)
            return path, f"{_short(instance)} is not of type {' or '.join(types)}"
        case _:
            return path, error.message


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unexpected(error: ValidationError) -> str:
    """The first property the schema does not allow; jsonschema only names it inside its message."""
    found = re.findall(r"'([^']*)'", error.message)
    schema = error.schema if isinstance(error.schema, dict) else {}
    known = set(schema.get("properties", {}))
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    instance: Any = error.instance
    for key in instance:
        if key not in known and not any(p.search(key) for p in patterns) and (not found or key in found):
            return str(key)
    return found[0] if found else ""
