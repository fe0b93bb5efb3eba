"""Body -> mapping: JSON or YAML, duplicate keys rejected, the result always JSON-compatible."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import yaml

from pai.domain.errors import InvalidProtocolError
from pai.jobspec.bounds import MAX_DEPTH, MAX_NODES, check_json_depth, check_values, check_yaml_shape, too_deep
from pai.jobspec.paths import join_path

__all__ = ["MAX_DEPTH", "MAX_NODES", "Decoded", "Syntax", "decode", "load_json"]


class Syntax(Enum):
    JSON = "json"
    YAML = "yaml"

    @classmethod
    def of(cls, text: str, content_type: str | None, bounded: bool = True) -> Syntax:
        """JSON when the content type says so or the body is a JSON object; YAML otherwise."""
        if content_type is not None and "json" in content_type.split(";", 1)[0].strip().lower():
            return cls.JSON
        if text.lstrip().startswith("{"):
            try:
                load_json(text, bounded)
            except InvalidProtocolError:
                # A YAML flow mapping (``{a: 1}``) is not JSON; a broken JSON object is not YAML either.
                return cls.YAML if _is_yaml(text) else cls.JSON
            return cls.JSON
        return cls.YAML


@dataclass(frozen=True, slots=True)
class Decoded:
    config: dict[str, Any]
    syntax: Syntax
    text: str


def decode(body: bytes | str, content_type: str | None = None, *, bounded: bool = True) -> Decoded:
    """Parse ``body`` into a mapping; any failure is an :class:`InvalidProtocolError`.

    ``bounded=False`` (for reading a stored spec again) skips the bounds added since it may have been accepted:
    nesting depth, NaN and the values :func:`pai.jobspec.bounds.check_values` refuses."""
    text = _text(body)
    syntax = Syntax.of(text, content_type, bounded)
    data = load_json(text, bounded) if syntax is Syntax.JSON else _load_yaml(text, bounded)
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise InvalidProtocolError(f"job spec must be a mapping, got {kind}", field="")
    if bounded:
        check_values(data)
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


def _no_constant(name: str) -> Any:
    raise InvalidProtocolError(f"malformed JSON: {name} is not a JSON number", field="")


def load_json(text: str, bounded: bool = True) -> Any:
    """JSON text as Python values, its depth checked first; duplicate keys, ``NaN``/``Infinity`` and numbers too
    long to convert are an :class:`InvalidProtocolError`."""
    if bounded:
        check_json_depth(text)
    constants = _no_constant if bounded else None
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=constants)
    except json.JSONDecodeError as exc:
        raise InvalidProtocolError(
            f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", field=""
        ) from exc
    except ValueError as exc:  # an integer past sys.get_int_max_str_digits()
        raise InvalidProtocolError(f"malformed JSON: {exc}".split(";")[0], field="") from exc


class _Loader(yaml.SafeLoader):
    """SafeLoader whose timestamps stay strings, so that every document is JSON-compatible."""


def _timestamp_as_text(loader: _Loader, node: yaml.Node) -> str:
    assert isinstance(node, yaml.ScalarNode)
    return str(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


def _is_yaml(text: str) -> bool:
    """Whether the text parses as YAML (its events only: nothing is built)."""
    try:
        return check_yaml_shape(text, _Loader)
    except InvalidProtocolError:  # YAML, but past a bound: decoding it as YAML says which
        return True


def _load_yaml(text: str, bounded: bool = True) -> Any:
    if bounded:
        check_yaml_shape(text, _Loader)
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # the reader refuses control characters (NUL, ...) before parsing
        where = f"character {exc.character!r} at position {exc.position}"
        raise InvalidProtocolError(f"malformed YAML: {exc.reason}: {where}", field="") from exc
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_keys(node, MAX_DEPTH if bounded else None)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise InvalidProtocolError(f"malformed YAML: {exc.problem or exc.context}{where}", field="") from exc
    except yaml.YAMLError as exc:
        raise InvalidProtocolError(f"malformed YAML: {exc}", field="") from exc
    except ValueError as exc:  # a tagged scalar that does not convert (``!!int abc``, too many digits)
        raise InvalidProtocolError(f"malformed YAML: {exc}".split(";")[0], field="") from exc
    finally:
        loader.dispose()


Walk = Callable[[yaml.Node, str, int], tuple[int, int]]


def _check_keys(root: yaml.Node, max_depth: int | None) -> None:
    """Reject duplicate keys (PyYAML silently keeps the last one), non-scalar keys, recursive aliases and
    documents whose aliases expand past :data:`MAX_NODES` nodes or :data:`MAX_DEPTH` levels."""
    shapes: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, height)
    active: set[int] = set()

    def walk(node: yaml.Node, path: str, level: int) -> tuple[int, int]:
        if id(node) in active:
            raise InvalidProtocolError(f"{path or '<root>'}: recursive YAML alias", field=path)
        if id(node) not in shapes:
            if max_depth is not None and level > max_depth and isinstance(node, yaml.CollectionNode):
                raise too_deep(f" at {path} (line {node.start_mark.line + 1}, aliases expanded)")
            active.add(id(node))
            size, height = 1, 0
            if isinstance(node, yaml.SequenceNode):
                for i, item in enumerate(node.value):
                    item_size, item_height = walk(item, f"{path}[{i}]", level + 1)
                    size, height = size + item_size, max(height, item_height)
            elif isinstance(node, yaml.MappingNode):
                mapping_size, height = _walk_mapping(node, path, level, walk)
                size += mapping_size
            active.discard(id(node))
            if size > MAX_NODES:
                raise InvalidProtocolError(
                    f"{path or '<root>'}: document expands past {MAX_NODES} nodes", field=path
                )
            shapes[id(node)] = (size, height + 1 if isinstance(node, yaml.CollectionNode) else 0)
        size, height = shapes[id(node)]
        if max_depth is not None and level + height - 1 > max_depth:
            raise too_deep(f" at {path or '<root>'} (line {node.start_mark.line + 1}, aliases expanded)")
        return size, height

    walk(root, "", 1)


def _walk_mapping(node: yaml.MappingNode, path: str, level: int, walk: Walk) -> tuple[int, int]:
    size = height = 0
    seen: set[str] = set()
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            line = key_node.start_mark.line + 1
            raise InvalidProtocolError(f"{path or '<root>'}: keys must be scalars (line {line})", field=path)
        key = str(key_node.value)
        if key == "<<":  # merge key: its mapping's keys join this one
            merged_size, merged_height = walk(value_node, path, level)
            size, height = size + merged_size, max(height, merged_height - 1)
            continue
        child = join_path(path, key)
        if key in seen:
            what = "task role" if path == "taskRoles" else "key"
            line = key_node.start_mark.line + 1
            raise InvalidProtocolError(f"{child}: duplicate {what} {key!r} (line {line})", field=child)
        seen.add(key)
        value_size, value_height = walk(value_node, child, level + 1)
        size, height = size + 1 + value_size, max(height, value_height)
    return size, height
