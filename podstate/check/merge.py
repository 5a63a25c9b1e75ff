"""``podstate report merge OUT.json IN.json...``: the shards' reports as one of the fleet.

It reads the JSON reports the shards wrote (``podstate check --shard K/N --json``) and gives
the results of the whole fleet, whose report (``podstate.check.result.to_json``) is valid
against ``schema/check-report.schema.json``, with the summary and exit status recomputed
from every pod. A shard report that is missing, unreadable or not a check report becomes a
synthetic pod entry named ``shard report <path>`` with status ``error`` and the reason, so
the merged summary counts it and the exit status is 1; a pod found in two reports (shards
of different N mixed) is an error too. The JUnit and Markdown writers run on the merged
``PodResult``\\ s.
"""

from __future__ import annotations

import json
from pathlib import Path

from podstate.check import result
from podstate.check.result import PodResult

MISSING_PREFIX = "shard report "


def missing(path: str, reason: str) -> tuple[str, PodResult]:
    """Return the synthetic error entry that stands for an unusable shard report: its name
    (``shard report PATH``) and a PodResult with status error and ``reason``, so a lost
    shard fails the merged report instead of silently shrinking the fleet."""
    return f"{MISSING_PREFIX}{path}", PodResult(status="error", error=reason)


def load(path: str) -> tuple[dict[str, PodResult], str | None]:
    """Return the pods of the shard report at ``path``, or ({}, why) when it cannot be used:
    missing, unreadable, not JSON, or not a check report."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, "missing: no such file"
    except (OSError, UnicodeDecodeError) as e:
        return {}, f"unreadable: {getattr(e, 'strerror', None) or e}"
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        return {}, f"unreadable: not JSON ({e.msg}, line {e.lineno})"
    problem = result.problem(document)
    if problem:
        return {}, problem
    return result.from_json(document), None


def merge(
    reports: list[tuple[str, dict[str, PodResult] | None, str | None]],
) -> dict[str, PodResult]:
    """Return the fleet's results from the shards' ``(path, pods, problem)``.

    A report with a problem adds its synthetic error entry (``missing``); a pod in two
    reports becomes an error naming both, since shards never overlap: the reports came from
    different fleets or different N. Everything else is kept as the shard reported it.
    """
    merged: dict[str, PodResult] = {}
    seen: dict[str, str] = {}
    for path, pods, problem in reports:
        if problem is not None or pods is None:
            name, lost = missing(path, f"shard report {path} {problem or 'missing'}")
            merged[name] = lost
            continue
        for name, pod in pods.items():
            if name in seen:
                merged[name] = PodResult(
                    status="error",
                    error=f"in two shard reports, {seen[name]} and {path}: shards of different N?",
                )
                continue
            seen[name] = path
            merged[name] = pod
    return merged


def merge_files(paths: list[str]) -> dict[str, PodResult]:
    """Return the fleet's results merged from the shard reports at ``paths`` (``merge``)."""
    loaded = []
    for path in paths:
        pods, problem = load(path)
        loaded.append((path, pods if problem is None else None, problem))
    return merge(loaded)


def problems(results: dict[str, PodResult]) -> list[str]:
    """Return one line per synthetic error entry of a merged report (a lost shard)."""
    return [
        r.error or name for name, r in sorted(results.items()) if name.startswith(MISSING_PREFIX)
    ]
