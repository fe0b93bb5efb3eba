"""Body -> mapping: JSON or YAML, duplicate keys rejected, the result always JSON-compatible."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import yaml

from pai.domain.errors import InvalidProtocolError
from pai.jobspec.paths import join_path


class Syntax(Enum):
    JSON = "json"
    YAML = "yaml"

    @classmethod
    def of(cls, text: str, content_type: str | None) -> Syntax:
        """JSON when the content type says so or the body is a JSON object; YAML otherwise."""
        if content_type is not None and "json" in content_type.split(";", 1)[0].strip().lower():
            return cls.JSON
        if text.lstrip().startswith("{"):
            try:
                json.loads(text)
            except ValueError:
                # A YAML flow mapping (``{a: 1}``) is not JSON; a broken JSON object is not YAML either.
                return cls.YAML if _is_yaml(text) else cls.JSON
            return cls.JSON
        return cls.YAML


@dataclass(frozen=True, slots=True)
class Decoded:
    config: dict[str, Any]
    syntax: Syntax
    text: str


def decode(body: bytes | str, content_type: str | None = None) -> Decoded:
    """Parse ``body`` into a mapping; any failure is an :class:`InvalidProtocolError`."""
    text = _text(body)
    syntax = Syntax.of(text, content_type)
    data = _load_json(text) if syntax is Syntax.JSON else _load_yaml(text)
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise InvalidProtocolError(f"job spec must be a mapping, got {kind}", field="")
    return Decoded(config=data, syntax=syntax, text=text)


def _text(body: bytes | str) -> str:
    if isinstance(body, str):
        return body
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidProtocolError(f"job spec is not UTF-8: {exc.reason} at byte {exc.start}", field="") from exc


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidProtocolError(f"{key}: duplicate key {key!r}", field=key)
        out[key] = value
    return out


def _load_json(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicates)
    except json.JSONDecodeError as exc:
        raise InvalidProtocolError(
            f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", field=""
        ) from exc


class _Loader(yaml.SafeLoader):
    """SafeLoader whose timestamps stay strings, so that every document is JSON-compatible."""


def _timestamp_as_text(loader: _Loader, node: yaml.Node) -> str:
    assert isinstance(node, yaml.ScalarNode)
    return str(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


def _is_yaml(text: str) -> bool:
    try:
        yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        return False
    return True


def _load_yaml(text: str) -> Any:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_keys(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise InvalidProtocolError(f"malformed YAML: {exc.problem or exc.context}{where}", field="") from exc
    except yaml.YAMLError as exc:
        raise InvalidProtocolError(f"malformed YAML: {exc}", field="") from exc
    finally:
        loader.dispose()


MAX_NODES = 100_000  # expanded size limit: aliases must not blow a small document up ("billion laughs")


def _check_keys(root: yaml.Node) -> None:
    """Reject duplicate keys (PyYAML silently keeps the last one), non-scalar keys, recursive aliases and
    documents whose aliases expand past :data:`MAX_NODES` nodes."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def walk(node: yaml.Node, path: str) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in active:
            raise InvalidProtocolError(f"{path or '<root>'}: recursive YAML alias", field=path)
        active.add(id(node))
        size = 1
        if isinstance(node, yaml.SequenceNode):
            size += sum(walk(item, f"{path}[{i}]") for i, item in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            size += _walk_mapping(node, path, walk)
        active.discard(id(node))
        if size > MAX_NODES:
            raise InvalidProtocolError(f"{path or '<root>'}: document expands past {MAX_NODES} nodes", field=path)
        sizes[id(node)] = size
        return size

    walk(root, "")


def _walk_mapping(node: yaml.MappingNode, path: str, walk: Callable[[yaml.Node, str], int]) -> int:
    size = 0
    seen: set[str] = set()
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            line = key_node.start_mark.line + 1
            raise InvalidProtocolError(f"{path or '<root>'}: keys must be scalars (line {line})", field=path)
        key = str(key_node.value)
        if key == "<<":  # merge key: its mapping's keys join this one
            size += walk(value_node, path)
            continue
        child = join_path(path, key)
        if key in seen:
            what = "task role" if path == "taskRoles" else "key"
            line = key_node.start_mark.line + 1
            raise InvalidProtocolError(f"{child}: duplicate {what} {key!r} (line {line})", field=child)
        seen.add(key)
        size += 1 + walk(value_node, child)
    return size
