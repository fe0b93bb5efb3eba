"""OpenPAI's v2 templating: ``<% $parameters.x %>``, ``<% $secrets.x %>``, ``<% $data.uri[0] %>`` in commands;
and in a trial of an experiment, ``<% $hparams.lr %>`` (its hyperparameters).

A tag naming none of :data:`NAMESPACES` (``<% $env.HOME %>``, ``<% name %>``) is treated as OpenPAI treats it:
its REST server (``src/rest-server/src/middlewares/v2/protocol.js``, ``render``) writes a tag it cannot resolve
back as ``<% name %>`` (indices as ``.0``); its runtime (openpai-runtime ``user_command_renderer.py``) then
renders the command once more with the job's secrets, when there are any, and a tag left over becomes empty.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pai.domain.errors import InvalidProtocolError

_TAG = re.compile(r"<%(.*?)%>", re.DOTALL)
_REFERENCE = re.compile(r"\$([A-Za-z_]\w*)((?:\.[^.\[\]\s]+|\[[0-9]{1,9}\])*)")
_STEP = re.compile(r"\.([^.\[\]\s]+)|\[([0-9]{1,9})\]")
_INDEX = re.compile(r"\[(\d+)\]")
_SIGILS = "#^/>{&=!"  # mustache's sections, partials, comments, delimiters: refused (OpenPAI drops them silently)
MAX_RENDERED = 65_536  # characters of one rendered field (a role's commands together: see v2._commands)
# What each namespace is called in errors: "unknown parameter 'x'".
_NOUNS = {
    "parameters": "parameter",
    "secrets": "secret",
    "data": "data field",
    "script": "script field",
    "output": "output field",
    "hparams": "hyperparameter",  # a trial of an experiment's: its hyperparameters (pai.jobspec.experiment)
}
NAMESPACES = frozenset(_NOUNS)


def render(
    text: str, scope: Mapping[str, Any], field: str, limit: int = MAX_RENDERED, *, blank_unknown: bool = False
) -> str:
    """Replace every ``<% $namespace.key... %>`` in ``text`` with its value from ``scope``.

    A namespace of :data:`NAMESPACES` missing from ``scope``, or an unknown key in one, is an
    :class:`InvalidProtocolError` naming ``field`` and the reference; so is a mustache section, comment or
    partial (``<%# x %>``), and a result longer than ``limit`` characters, refused as soon as the substitutions
    pass it (a large parameter referenced many times must not grow the master's memory). Any other tag is kept
    as OpenPAI writes it back (``<% $env.x.0 %>``), or becomes empty with ``blank_unknown`` (the job has secrets).
    """
    length = [len(text)]

    def substitute(match: re.Match[str]) -> str:
        inner = match.group(1).strip()
        if inner and inner[0] in _SIGILS:
            raise InvalidProtocolError(f"{field}: unsupported template {match.group(0)!r}", field=field)
        ref = _REFERENCE.fullmatch(inner)
        if ref is None or ref.group(1) not in NAMESPACES:
            kept = "<% " + _INDEX.sub(r".\1", inner) + " %>"
            return _grow(length, "" if blank_unknown else kept, match, limit, field)
        namespace, steps = ref.group(1), ref.group(2)
        if namespace not in scope:
            raise InvalidProtocolError(
                f"{field}: unknown reference ${namespace} in {match.group(0)!r}"
                f" (use {', '.join('$' + n for n in sorted(scope))})",
                field=field,
            )
        value = scope[namespace]
        for step in _STEP.finditer(steps):
            key, index = step.group(1), step.group(2)
            value = _step(value, key, index)
            if value is _MISSING:
                noun = _NOUNS.get(namespace, namespace)
                shown = steps.lstrip(".")
                raise InvalidProtocolError(f"{field}: unknown {noun} {shown!r} in {match.group(0)!r}", field=field)
        return _grow(length, _show(value), match, limit, field)

    _check_length(len(text), limit, field)
    return _TAG.sub(substitute, text)


def _grow(length: list[int], replacement: str, match: re.Match[str], limit: int, field: str) -> str:
    length[0] += len(replacement) - len(match.group(0))
    _check_length(length[0], limit, field)
    return replacement


def _check_length(length: int, limit: int, field: str) -> None:
    if length > limit:
        raise InvalidProtocolError(
            f"{field}: longer than {MAX_RENDERED} characters once templates are rendered"
            " (a role's commands count together)",
            field=field,
        )


_MISSING = object()


def _step(value: Any, key: str | None, index: str | None) -> Any:
    if key is not None:
        if isinstance(value, Mapping) and key in value:
            return value[key]
        if isinstance(value, list) and key.isascii() and key.isdigit() and len(key) <= 9 and int(key) < len(value):
            return value[int(key)]
        return _MISSING
    assert index is not None
    if isinstance(value, list) and int(index) < len(value):
        return value[int(index)]
    return _MISSING


def _show(value: Any) -> str:
    """A value as JavaScript's template rendering would print it: ``true``, ``3``, ``a``; ``null`` is empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
