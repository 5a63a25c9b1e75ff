"""The numbers behind the benchmark reports: medians per step and setting, and line fits."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any


@dataclass
class Cell:
    """One step at one setting, over its runs."""

    median: float
    low: float
    high: float
    runs: int
    commands_max: int  # most remote commands any pod got, in any run
    commands_mean: float
    cpu: float | None  # median CPU seconds of the tool's processes on the control machine
    machine_cpu: float | None = None  # median CPU seconds of the whole machine, pods included


def cells(raw: dict[str, Any]) -> dict[tuple[str, float, int], Cell]:
    """Return every (step, rtt_ms, pods) with its median time and commands per pod."""
    groups: dict[tuple[str, float, int], list[dict[str, Any]]] = {}
    for sample in raw["samples"]:
        for step, result in sample["steps"].items():
            groups.setdefault((step, sample["rtt_ms"], sample["pods"]), []).append(result)
    out = {}
    for key, results in groups.items():
        seconds = [r["seconds"] for r in results]
        out[key] = Cell(
            median=statistics.median(seconds),
            low=min(seconds),
            high=max(seconds),
            runs=len(seconds),
            commands_max=int(max(r["commands"]["max"] for r in results)),
            commands_mean=statistics.fmean(r["commands"]["mean"] for r in results),
            cpu=_median(results, "client_cpu_s"),
            machine_cpu=_median(results, "machine_cpu_s"),
        )
    return out


def _median(results: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in results if key in r]
    return statistics.median(values) if values else None


def slope(points: list[tuple[int, float]]) -> float | None:
    """Return the least-squares slope of y over x; None for fewer than two distinct x."""
    if len(points) < 2:
        return None
    xs, ys = zip(*points, strict=True)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else None


def step_excess(points: list[tuple[int, float]], knee: int) -> tuple[int, float] | None:
    """Return (pods, seconds above the linear trend) for the largest count past ``knee``.

    The trend is the line through the two largest counts at or below ``knee`` (pyinfra's
    default parallelism, where a capped pool would start a second batch); None when the
    counts do not straddle it.
    """
    below = sorted(p for p in points if p[0] <= knee)[-2:]
    above = sorted(p for p in points if p[0] > knee)
    if len(below) < 2 or not above:
        return None
    (x1, y1), (x2, y2) = below
    x, y = above[-1]
    return x, y - (y2 + (y2 - y1) * (x - x2) / (x2 - x1))


def fmt(value: float | None, digits: int = 2) -> str:
    """Return ``value`` with ``digits`` decimals; a dash for None."""
    return "–" if value is None else f"{value:.{digits}f}"


def ratio(a: Cell | None, b: Cell | None) -> float | None:
    """Return the ratio of two cells' medians; None where either is missing or b is zero."""
    return a.median / b.median if a and b and b.median else None
