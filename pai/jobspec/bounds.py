"""Cheap checks that run before a body is built into objects, so that no document can exhaust the master.

A JSON body's nesting is measured on its text before ``json.loads``; a YAML body's nesting and node count on
its parse events (LibYAML's when PyYAML has it) before anything is composed; a decoded document is walked
once, without recursion, for what no job spec may hold (NUL characters, lone surrogates, infinities, YAML
types that JSON lacks, keys that are not strings).
"""

from __future__ import annotations

import math
import re
from collections import deque
from typing import Any

import yaml

from pai.domain.errors import InvalidProtocolError
from pai.jobspec.paths import join_path

MAX_DEPTH = 64  # nested mappings and lists, JSON or YAML (aliases expanded)
MAX_NODES = 100_000  # expanded size limit: aliases must not blow a small document up ("billion laughs")

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\Z)|[\[{]|[\]}]', re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")
_FAST_LOADER: type[Any] | None = getattr(yaml, "CSafeLoader", None)  # LibYAML, where PyYAML was built with it


def too_deep(where: str) -> InvalidProtocolError:
    return InvalidProtocolError(f"<root>: nested deeper than {MAX_DEPTH} levels{where}", field="")


def check_json_depth(text: str) -> None:
    """Refuse JSON text whose arrays and objects nest deeper than :data:`MAX_DEPTH` (strings are skipped)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                column = match.start() - text.rfind("\n", 0, match.start())
                raise too_deep(f" (line {line} column {column})")
        elif token in ("]", "}"):
            depth -= 1


def check_yaml_shape(text: str, loader: type[Any]) -> bool:
    """Refuse YAML text nested deeper than :data:`MAX_DEPTH` or with more than :data:`MAX_NODES` nodes, from its
    parse events (no recursion, no nodes kept); True when the text parses. A syntax error stops the scan: the
    loader that runs next reports it, and everything before it was within bounds."""
    if _FAST_LOADER is not None and _scan(text, _FAST_LOADER):
        return True
    return _scan(text, loader)  # no LibYAML, or LibYAML disagrees with PyYAML: scan as PyYAML will parse


def _scan(text: str, loader_class: type[Any]) -> bool:
    """True when the whole text was scanned; False when a syntax error stopped the scan."""
    try:
        loader = loader_class(text)
    except yaml.YAMLError:  # the reader refuses control characters before parsing
        return False
    depth = nodes = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    mark = event.start_mark
                    raise too_deep(f" (line {mark.line + 1})" if mark is not None else "")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                continue
            elif not isinstance(event, yaml.NodeEvent):
                continue
            nodes += 1
            if nodes > MAX_NODES:
                raise InvalidProtocolError(f"<root>: document has more than {MAX_NODES} nodes", field="")
    except yaml.YAMLError:
        return False
    finally:
        loader.dispose()
    return True


def check_values(doc: Any) -> None:
    """Walk a decoded document (breadth first, no recursion) for what no spec may hold; the error names the
    first such field."""
    queue: deque[tuple[Any, str]] = deque([(doc, "")])
    while queue:
        value, path = queue.popleft()
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidProtocolError(
                        f"{path or '<root>'}: key {key!r} is not a string (quote it)", field=path
                    )
                child = join_path(path, key)
                _check_text(key, child)
                queue.append((item, child))
        elif isinstance(value, list):
            queue.extend((item, join_path(path, i)) for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidProtocolError(f"{path or '<root>'}: {value} is not a finite number", field=path)
        elif value is not None and not isinstance(value, int | float):  # bool is an int
            kind = type(value).__name__
            raise InvalidProtocolError(
                f"{path or '<root>'}: a YAML {kind} is not allowed (only mappings, lists, strings, numbers,"
                " booleans and null)",
                field=path,
            )


def _check_text(text: str, path: str) -> None:
    if "\x00" in text:
        raise InvalidProtocolError(f"{path or '<root>'}: NUL characters are not allowed", field=path)
    if _SURROGATE.search(text) is not None:
        raise InvalidProtocolError(f"{path or '<root>'}: lone UTF-16 surrogates are not allowed", field=path)
