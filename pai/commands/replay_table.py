"""The replay's figures for people: one column per configuration, and with two of them the change from the first
to the second."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pai.vc.replay_report import Group, Report, Spread

Row = tuple[str, ...]


def duration(seconds: float) -> str:
    """``42s``, ``12m 05s``, ``3h 07m``, ``2d 04h``."""
    s = round(abs(seconds))
    sign = "-" if seconds < 0 and s else ""
    if s < 60:
        return f"{sign}{s}s"
    if s < 3600:
        return f"{sign}{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{sign}{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{sign}{s // 86400}d {s % 86400 // 3600:02d}h"


def _count(n: float) -> str:
    return f"{n:,.0f}"


def _hours(n: float) -> str:
    return f"{n:,.1f}"


def _percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def _change(a: float, b: float, kind: str) -> str:
    """How the second configuration differs from the first."""
    if a == b:
        return "="
    if kind == "%":
        return f"{100 * (b - a):+.1f} pts"
    diff = duration(b - a) if kind == "s" else (f"{b - a:+,.1f}" if kind == "h" else f"{b - a:+,.0f}")
    if kind == "s" and b > a:
        diff = "+" + diff
    return f"{diff} ({100 * (b - a) / a:+.0f}%)" if a else diff


def render(names: Sequence[str], reports: Sequence[Report]) -> str:
    pair = len(reports) == 2
    rows: list[Row] = []

    def add(group: str, label: str, values: Sequence[float | None], show: Callable[[float], str], kind: str) -> None:
        cells = [show(v) if v is not None else "-" for v in values]
        a, b = (values[0], values[-1]) if pair else (None, None)
        change = (_change(a, b, kind),) if pair and a is not None and b is not None else (("-",) if pair else ())
        rows.append((group, label, *cells, *change))

    add("cluster", "GPUs", [r.capacity_gpus for r in reports], _count, "n")
    add("", "replay span", [r.span_seconds for r in reports], duration, "s")
    add("", "GPU utilization", [r.utilization for r in reports], _percent, "%")
    add("", "  until the last arrival", [r.utilization_arrivals for r in reports], _percent, "%")
    add("", "GPU-hours allocated", [r.gpu_hours for r in reports], _hours, "h")
    add("", "  lost to preemption", [r.lost_gpu_hours for r in reports], _hours, "h")
    add("", "preemptions", [r.overall.preemptions for r in reports], _count, "n")
    causes = sorted({cause for r in reports for cause in r.resizes})
    if causes:
        add("", "resizes", [sum(r.resizes.values()) for r in reports], _count, "n")
        for cause in causes:
            add("", f"  {cause}", [r.resizes.get(cause, 0) for r in reports], _count, "n")
    add("", "jobs that never ran", [r.overall.never_ran for r in reports], _count, "n")
    reasons = sorted({code for r in reports for code in r.never_ran})
    for code in reasons:
        add("", f"  {code}", [r.never_ran.get(code, 0) for r in reports], _count, "n")
    add("", "scheduling passes", [r.passes for r in reports], _count, "n")
    groups = ["overall", *dict.fromkeys(g.name for r in reports for g in r.vcs)]
    for name in groups:
        found = [_group(r, name) for r in reports]
        rows.append(())
        _group_rows(add, name if name == "overall" else f"VC {name}", found)
    return _table(("", "", *names, *(("change",) if pair else ())), rows)


def _table(headers: Row, rows: Sequence[Row]) -> str:
    """Labels left-aligned, figures right-aligned, two spaces between columns; an empty row is a blank line."""
    widths = [max(len(h), *(len(r[i]) for r in rows if r)) for i, h in enumerate(headers)]

    def line(cells: Row) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths,
                                                                                           strict=True))).rstrip()

    return "\n".join(line(r) if r else "" for r in (headers, *rows))


def _group(r: Report, name: str) -> Group | None:
    return r.overall if name == "overall" else next((g for g in r.vcs if g.name == name), None)


def _group_rows(add: Callable[[str, str, Sequence[float | None], Callable[[float], str], str], None], title: str,
                found: Sequence[Group | None]) -> None:
    def values(get: Callable[[Group], float]) -> list[float | None]:
        return [get(g) if g is not None else None for g in found]

    add(title, "jobs", values(lambda g: g.jobs), _count, "n")
    if all(g is None or not g.jobs for g in found):
        return
    add("", "completed", values(lambda g: g.completed), _count, "n")
    add("", "never ran", values(lambda g: g.never_ran), _count, "n")
    add("", "preempted", values(lambda g: g.preemptions), _count, "n")
    for label, spreads in (("completion time", [g.completion if g else None for g in found]),
                           ("queueing delay", [g.queueing if g else None for g in found])):
        for stat in ("mean", "p50", "p95", "p99"):
            add("", f"{label} {stat}", [_stat(sp, stat) for sp in spreads], duration, "s")


def _stat(spread: Spread | None, stat: str) -> float | None:
    return None if spread is None or not spread.count else spread.to_dict()[stat]
