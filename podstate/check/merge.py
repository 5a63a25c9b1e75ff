"""``podstate report merge OUT.json IN.json...``: the shards' reports as one of the fleet.

It reads the JSON reports the shards wrote (``podstate check --shard K/N --json``) and gives
the results of the whole fleet, whose report (``podstate.check.result.to_json``) is valid
against ``schema/check-report.schema.json``, with the summary and exit status recomputed
from every pod. Every problem becomes a synthetic pod entry with status ``error`` and the
reason, so the merged summary counts it and the exit status is 1:

* a report that is missing, unreadable or not a check report: ``shard report <path>``;
* a report that does not belong to the set (each report records its ``K/N``): the same
  shard again, a shard of another N, or a check of the whole fleet among shard reports:
  ``shard report <path>``, its pods left out;
* a shard of the set that no usable report is of: ``shard K/N``.

A set is whole when its reports are of shards 1 to N of one N, each once. Reports of checks
without ``--shard`` (or older than format 5, which has no ``shard``) merge as given: nothing
says what a whole set of them is. A pod found in two reports is an error too. The JUnit and
Markdown writers run on the merged ``PodResult``\\ s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from podstate.check import result
from podstate.check.result import PodResult
from podstate.check.shards import Shard

MISSING_PREFIX = "shard report "
SYNTHETIC_PREFIX = "shard "  # every synthetic entry's name; no pod name has a space


@dataclass(frozen=True)
class Report:
    """One shard report as read: its pods, or None and why it cannot be used (``problem``),
    and the shard it says it is of (None: a check of the whole fleet)."""

    path: str
    pods: dict[str, PodResult] | None
    problem: str | None = None
    shard: Shard | None = None
    checked_at: str | None = None


def missing(path: str, reason: str) -> tuple[str, PodResult]:
    """Return the synthetic error entry that stands for an unusable shard report: its name
    (``shard report PATH``) and a PodResult with status error and ``reason``, so a lost
    shard fails the merged report instead of silently shrinking the fleet."""
    return f"{MISSING_PREFIX}{path}", PodResult(status="error", error=reason)


def load(path: str) -> Report:
    """Return the shard report at ``path``, with why it cannot be used when it is missing,
    unreadable, not JSON, or not a check report."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return Report(path, None, "missing: no such file")
    except (OSError, UnicodeDecodeError) as e:
        return Report(path, None, f"unreadable: {getattr(e, 'strerror', None) or e}")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        return Report(path, None, f"unreadable: not JSON ({e.msg}, line {e.lineno})")
    problem = result.problem(document)
    if problem:
        return Report(path, None, problem)
    shard, checked_at = document.get("shard"), document.get("checked_at")
    if shard is None:
        return Report(path, result.from_json(document), checked_at=checked_at)
    if not shard["index"] <= shard["count"]:
        return Report(path, None, f"not a podstate check report (shard: {shard})")
    where = Shard(shard["index"], shard["count"])
    return Report(path, result.from_json(document), shard=where, checked_at=checked_at)


def outsiders(reports: list[Report]) -> dict[str, str]:
    """Return, by path, why a usable report is left out of the set: the same shard as an
    earlier report, a shard of another N than the first shard report's, or a check of the
    whole fleet among shard reports. Each report is weighed against the first shard report,
    so the same set always leaves out the same reports."""
    usable = [r for r in reports if r.pods is not None]
    first = next((r for r in usable if r.shard is not None), None)
    if first is None or first.shard is None:
        return {}
    why: dict[str, str] = {}
    seen: dict[int, str] = {}
    for report in usable:
        shard = report.shard
        if shard is None:
            why[report.path] = (
                f"a check of the whole fleet (no --shard), among shard reports "
                f"({first.path} is shard {first.shard}): left out"
            )
        elif shard.count != first.shard.count:
            why[report.path] = (
                f"shard {shard}, but {first.path} is shard {first.shard}: shards of "
                "different N do not make one fleet; left out"
            )
        elif shard.index in seen:
            why[report.path] = f"shard {shard} again ({seen[shard.index]} is too): left out"
        else:
            seen[shard.index] = report.path
    return why


def absent(reports: list[Report], left_out: dict[str, str]) -> list[Shard]:
    """Return the shards of the set that no report kept is of (none for a merge of checks
    of the whole fleet)."""
    kept = [r.shard for r in reports if r.pods is not None and r.path not in left_out]
    shards = [s for s in kept if s is not None]
    if not shards:
        return []
    count = shards[0].count
    return [Shard(k, count) for k in range(1, count + 1) if Shard(k, count) not in shards]


def merge(reports: list[Report]) -> dict[str, PodResult]:
    """Return the fleet's results from the shards' reports.

    A report with a problem, or left out of the set (``outsiders``), adds its synthetic
    error entry (``missing``); a shard of the set that no report is of adds ``shard K/N``
    (``absent``); a pod in two reports becomes an error naming both, since shards never
    overlap. Everything else is kept as the shard reported it.
    """
    merged: dict[str, PodResult] = {}
    seen: dict[str, str] = {}
    left_out = outsiders(reports)
    for report in reports:
        path, pods = report.path, report.pods
        if pods is None or path in left_out:
            why = f": {left_out[path]}" if path in left_out else f" {report.problem}"
            name, lost = missing(path, f"shard report {path}{why}")
            merged[name] = lost
            continue
        for name, pod in pods.items():
            if name in seen:
                merged[name] = PodResult(
                    status="error",
                    error=f"in two shard reports, {seen[name]} and {path}: a pod is in one only",
                )
                continue
            seen[name] = path
            merged[name] = pod
    for shard in absent(reports, left_out):
        merged[f"shard {shard}"] = PodResult(
            status="error", error=f"shard {shard} missing: no report given is of it"
        )
    return merged


def oldest(reports: list[Report]) -> str | None:
    """Return when the oldest of the usable ``reports`` read its pods (their ``checked_at``,
    which sort as the times do): the merged report is as old as that. None when one of them
    does not say (a report of format 5 or older), or none is usable."""
    times = [r.checked_at for r in reports if r.pods is not None]
    return None if not times or None in times else min(t for t in times if t is not None)


def problems(results: dict[str, PodResult]) -> list[str]:
    """Return one line per synthetic error entry of a merged report (a lost shard, a report
    left out of the set, a shard no report is of)."""
    return [
        r.error or name for name, r in sorted(results.items()) if name.startswith(SYNTHETIC_PREFIX)
    ]
