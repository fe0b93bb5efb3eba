"""Rendering for people (aligned tables, times, sizes) and for scripts (raw JSON)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar, cast

import click

MISSING = "-"
F = TypeVar("F", bound=Callable[..., Any])


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"

    def emit(self, raw: Any, render: Callable[[Any], str]) -> None:
        """Print ``raw`` as the master sent it (JSON), or ``render(raw)`` for people (table)."""
        if self is OutputFormat.JSON:
            click.echo(json.dumps(raw, indent=2, sort_keys=False))
        else:
            click.echo(render(raw))


def output_option(func: F) -> F:
    """``-o table|json``, and ``--json`` for ``-o json``; the command gets ``output``."""

    @functools.wraps(func)
    def choose(*args: Any, output: OutputFormat, as_json: bool, **kwargs: Any) -> Any:
        return func(*args, output=OutputFormat.JSON if as_json else output, **kwargs)

    with_flag = click.option("--json", "as_json", is_flag=True, help="The same as -o json.")(choose)
    return cast(F, click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice([f.value for f in OutputFormat]),
        default=OutputFormat.TABLE.value,
        show_default=True,
        callback=lambda _ctx, _param, value: OutputFormat(value),
        help="table for people, json for scripts (the master's raw answer).",
    )(with_flag))


def cell(value: object) -> str:
    if value is None or value == "":
        return MISSING
    return str(value)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces; no trailing blanks."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = [list(headers), *cells]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def format_time(ms: float | None) -> str:
    """An epoch in milliseconds as local ``YYYY-MM-DD HH:MM:SS``."""
    if not ms:
        return MISSING
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def format_ago(ms: float | None, now_ms: float) -> str:
    """How long ago an epoch in milliseconds was: ``12s ago``, ``3m ago``, ``2h ago``, ``5d ago``."""
    if not ms:
        return MISSING
    seconds = max(0, int((now_ms - ms) / 1000))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def format_number(value: float | None) -> str:
    """``4`` rather than ``4.0``; up to two decimals otherwise."""
    if value is None:
        return MISSING
    return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def format_memory(mb: float | None) -> str:
    """Megabytes as ``512M`` or ``15.5G``."""
    if mb is None:
        return MISSING
    if mb < 1024:
        return f"{format_number(mb)}M"
    return f"{format_number(round(mb / 1024, 1))}G"


def used_total(used: object, total: object, fmt: Callable[[float | None], str] = format_number) -> str:
    def num(v: object) -> float | None:
        return float(v) if isinstance(v, int | float) else None

    return f"{fmt(num(used))}/{fmt(num(total))}"
