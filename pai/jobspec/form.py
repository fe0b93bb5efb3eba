"""A v1 job posted as an HTML form, as OpenPAI's VS Code extension posts one (``request``'s ``form:``, i.e. the
``qs`` library's encoding: ``taskRoles[0][name]=worker&taskRoles[0][taskNumber]=2``).

OpenPAI's REST server read such a body with Express's extended form parser, so every value arrives as a string,
and Joi's conversion then turned ``"2"`` into 2 where its schema wanted a number. Here the form becomes the JSON
object it stands for, and a string becomes a number, a boolean or null where the v1 schema
(``job_schemas/v1.json``) asks for one there; anything that does not convert is left for the schema to refuse,
naming the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pai.domain.errors import InvalidProtocolError
from pai.domain.limits import JobLimits
from pai.jobspec.parse import ParsedJob, parse_job
from pai.jobspec.schema import ProtocolVersion, load_schema

_KEY = re.compile(r"^([^\[\]]+)((?:\[[^\[\]]*\])*)$")
MAX_INDEX = 1000  # a form's array index past this is refused (qs itself turns such keys into object keys)


def _path(key: str) -> list[str]:
    match = _KEY.match(key)
    if match is None:
        raise InvalidProtocolError(f"{key}: not a form field name (e.g. taskRoles[0][name])", field=key)
    return [match.group(1), *re.findall(r"\[([^\[\]]*)\]", match.group(2))]


def _put(tree: dict[str, Any], parts: list[str], value: str, key: str) -> None:
    node: Any = tree
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt = None if last else parts[i + 1]
        child: Any = value if last else ([] if nxt is not None and (nxt == "" or nxt.isdigit()) else {})
        if isinstance(node, list):
            index = len(node) if part == "" else int(part) if part.isdigit() else -1
            if index < 0 or index > MAX_INDEX:
                raise InvalidProtocolError(f"{key}: array index {part!r} is not one from 0 to {MAX_INDEX}", field=key)
            while len(node) <= index:
                node.append(None)
            if node[index] is None or last:
                node[index] = child
            node = node[index]
        else:
            if last or part not in node:
                node[part] = child
            node = node[part]
        if not last and not isinstance(node, list | dict):
            raise InvalidProtocolError(f"{key}: {'.'.join(parts[: i + 1])} is given both as a value and as a "
                                       "structure", field=key)


def nest(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Form fields in qs's bracket notation as the nested object they stand for."""
    tree: dict[str, Any] = {}
    for key, value in pairs:
        _put(tree, _path(key), value, key)
    return tree


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        ref = schema["$ref"].removeprefix("#/")
        target: Any = root
        for part in ref.split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _types(schema: dict[str, Any], root: dict[str, Any]) -> list[str]:
    schema = _resolve(schema, root)
    found = schema.get("type")
    types = [found] if isinstance(found, str) else list(found or [])
    for branch in schema.get("oneOf", []) + schema.get("anyOf", []):
        types += _types(branch, root)
    return types


def _convert(value: str, types: list[str]) -> Any:
    if "string" in types or not types:  # text is allowed (or nothing is known): it stays text
        return value
    for t in types:
        if t == "integer" and re.fullmatch(r"-?\d{1,18}", value):
            return int(value)
        if t == "number" and re.fullmatch(r"-?\d{1,18}(\.\d{1,18})?", value):
            return float(value) if "." in value else int(value)
        if t == "boolean" and value in ("true", "false"):
            return value == "true"
        if t == "null" and value == "":
            return None
    return value


def coerce(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> Any:
    """``value`` with its strings converted where ``schema`` asks for a number, boolean or null."""
    schema = _resolve(schema, root)
    if isinstance(value, str):
        return _convert(value, _types(schema, root))
    if isinstance(value, list):
        items = schema.get("items", {})
        return [coerce(v, items if isinstance(items, dict) else {}, root) for v in value]
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        return {k: coerce(v, props.get(k, extra if isinstance(extra, dict) else {}), root) for k, v in value.items()}
    return value


def v1_job_from_form(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """A v1 job posted as a form, as the JSON object it stands for."""
    root = load_schema(ProtocolVersion.V1)
    result: dict[str, Any] = coerce(nest(pairs), root, root)
    return result


def parse_form_job(pairs: Iterable[tuple[str, str]], priority_classes: Mapping[str, int],
                   limits: JobLimits) -> ParsedJob:
    """``parse_job`` of a v1 job posted as a form; the job is kept as the JSON it stands for."""
    return parse_job(json.dumps(v1_job_from_form(pairs)), "application/json", priority_classes, limits)
