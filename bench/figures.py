"""How the benchmarks print latencies: p50 and p95 of a list of seconds, in milliseconds."""

from __future__ import annotations

import statistics


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def line(name: str, values: list[float]) -> str:
    return (f"{name:<28} p50 {statistics.median(values) * 1000:8.1f} ms   p95 {pct(values, 0.95) * 1000:8.1f} ms"
            f"   (n={len(values)})")
