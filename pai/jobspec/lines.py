"""Where a refused document is wrong: the line (1-based) of the field an error names, from PyYAML's node marks (JSON
is YAML: one composer serves both), so that an editor can mark it.

The field path is the errors' own (``taskRoles.worker.resourcePerInstance.gpu``, ``taskRoles[0].gpuNumber``): the
line of the deepest part of it the document has (a missing field: its parent's); a bare name the document has
nowhere at the top (``virtualCluster`` of a v2 job or an experiment) is a key of that name nearest the top. A syntax
error's or a duplicate key's message already says its line (``... at line 3 column 5``, ``(line 7)``): that one.
A document past :data:`MAX_LOCATED` gets no line: composing it again would cost the writer thread (where a
submission is parsed) as much as its parse did, for a document no editor shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import yaml

from pai.domain.errors import PaiError

MAX_LOCATED = 64 * 1024  # characters
_IN_MESSAGE = re.compile(r"\bline (\d+)(?: column \d+|\))")
_INDEX = re.compile(r"\[(\d+)\]")


@contextmanager
def located(body: bytes | str) -> Iterator[None]:
    """A :class:`PaiError` raised inside, about a field of the document ``body``, leaves with its ``line``."""
    try:
        yield
    except PaiError as e:
        if e.line is None and e.field is not None:
            text = body.decode("utf-8-sig", errors="replace") if isinstance(body, bytes) else body
            e.line = line_of(text, e.field, e.message)
        raise


def line_of(text: str, field: str, message: str = "") -> int | None:
    """The line of ``field`` in ``text``, or None where it cannot be told (the document's root, a text that does
    not compose or is past :data:`MAX_LOCATED`)."""
    said = _IN_MESSAGE.search(message)
    if said:
        return int(said.group(1))
    if not field or len(text) > MAX_LOCATED:
        return None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return None
    if root is None:
        return None
    line, depth = _walk(root, field)
    if depth == 0:
        return _anywhere(root, field)
    return line


def _walk(node: yaml.Node, path: str) -> tuple[int | None, int]:
    """The line of the deepest node of ``path`` the document has, and how many parts of the path it matched."""
    line, depth, rest = None, 0, path
    while rest:
        index = _INDEX.match(rest)
        if index:
            position = int(index.group(1))
            if not isinstance(node, yaml.SequenceNode) or position >= len(node.value):
                break
            node, rest = node.value[position], rest[index.end():]
            line = node.start_mark.line + 1
        else:
            rest = rest.removeprefix(".")
            found = _key(node, rest)
            if found is None:
                break
            key, node = found
            rest = rest[len(str(key.value)):]
            line = key.start_mark.line + 1
        depth += 1
    return line, depth


def _key(node: yaml.Node, rest: str) -> tuple[yaml.ScalarNode, yaml.Node] | None:
    """The entry of a mapping whose key begins ``rest`` (the longest: a key may hold a dot)."""
    if not isinstance(node, yaml.MappingNode):
        return None
    best: tuple[yaml.ScalarNode, yaml.Node] | None = None
    for key, value in node.value:
        name = str(key.value) if isinstance(key, yaml.ScalarNode) else None
        if name is None or not rest.startswith(name) or rest[len(name):len(name) + 1] not in ("", ".", "["):
            continue
        if best is None or len(name) > len(str(best[0].value)):
            best = (key, value)
    return best


def _anywhere(root: yaml.Node, name: str) -> int | None:
    """The line of a key ``name`` nearest the top (a mapping's own keys before its values')."""
    stack: list[yaml.Node] = [root]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias: its node once
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == name:
                    return key.start_mark.line + 1
            stack.extend(value for _, value in reversed(node.value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
    return None
