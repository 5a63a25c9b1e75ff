"""Splitting a fleet across CI runners: ``--shard K/N``, and merging the shards' reports.

A pod belongs to shard ``sha256(name) mod N + 1``. The hash depends on the pod's name and
``N`` alone, so the assignment is the same on every runner and every run, and adding or
removing a pod moves no other pod. The CI system runs the N shards; podstate has no scheduler.

``podstate report merge OUT.json IN.json...`` reads the JSON reports the shards wrote
(``podstate check --json``) and writes one report of the whole fleet, valid against
``schema/check-report.schema.json``, with the summary and exit status recomputed from every
pod. A shard report that is missing, unreadable or not a check report becomes a synthetic
pod entry named ``shard report <path>`` with status ``error`` and the reason, so the merged
summary counts it and the exit status is 1; a pod found in two reports (shards of different
N mixed) is an error too. The JUnit and Markdown writers run on the merged ``PodResult``\\ s.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podstate.check.runner import PodResult

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
MISSING_PREFIX = "shard report "


class ShardError(ValueError):
    """A ``--shard`` value that is not K/N with 1 <= K <= N: one line."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def holds(self, name: str) -> bool:
        """Return whether the pod named ``name`` is in this shard."""
        return shard_of(name, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_of(name: str, count: int) -> int:
    """Return the shard (1..count) the pod named ``name`` belongs to.

    sha256 rather than Python's ``hash()``, which is salted per process: every runner of a
    CI matrix must put a pod in the same shard. The first 8 bytes of the digest, modulo
    ``count``, spread names evenly.
    """
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def parse(text: str) -> Shard:
    """Return the shard ``text`` (``K/N``) names; ShardError, one line, unless 1 <= K <= N."""
    match = _SHARD.match(text or "")
    if not match:
        raise ShardError(f"--shard {text}: expected K/N, for example 1/4")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ShardError(f"--shard {text}: K/N needs 1 <= K <= N")
    return Shard(index, count)


def select(names: list[str], shard: Shard | None) -> list[str]:
    """Return the names of ``names`` in ``shard``, in their order (all of them for None)."""
    return list(names) if shard is None else [n for n in names if shard.holds(n)]


# --- merging shard reports ---------------------------------------------------------------


def result_from_json(entry: dict[str, Any]) -> PodResult:
    """Return the PodResult a pod's entry of a JSON report describes, for the report writers.

    The JSON report does not list the roles a pod was checked for (``PodResult.checked``);
    the roles its changes and violations name stand in for them, so JUnit still has a case
    per failing role, and a pod with no finding gets one passing ``podstate check`` case.
    """
    changes = list(entry.get("changes") or [])
    violations = list(entry.get("violations") or [])
    roles = [c["role"] for c in changes] + [v["role"] for v in violations]
    checked = list(dict.fromkeys(roles))
    if entry.get("status") in ("ok", "drift", "restarted", "violation") and not checked:
        checked = ["podstate check"]
    return PodResult(
        status=entry["status"],
        changes=changes,
        violations=violations,
        error=entry.get("error"),
        checked=checked,
        waived=list(entry.get("waived") or []),
        stale_waivers=list(entry.get("stale_waivers") or []),
        host_key=entry.get("host_key"),
        restarted=entry.get("restarted"),
        ready=bool(entry.get("ready")),
        boot=entry.get("boot"),
    )


def _problem(document: Any) -> str | None:
    """Return why ``document`` is not a check report (None when it is one)."""
    from jsonschema import Draft202012Validator

    schema = json.loads(_packaged_schema())
    error = next(iter(Draft202012Validator(schema).iter_errors(document)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the document"
    return f"not a podstate check report ({where}: {error.message})"


def _packaged_schema() -> str:
    """Return the report schema's text as installed with the package (podstate.schema)."""
    from importlib import resources

    return resources.files("podstate.schema").joinpath("check-report.schema.json").read_text()


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
    problem = _problem(document)
    if problem:
        return {}, problem
    return {name: result_from_json(entry) for name, entry in document["pods"].items()}, None


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
            name, result = missing(path, f"shard report {path} {problem or 'missing'}")
            merged[name] = result
            continue
        for name, result in pods.items():
            if name in seen:
                merged[name] = PodResult(
                    status="error",
                    error=f"in two shard reports, {seen[name]} and {path}: shards of different N?",
                )
                continue
            seen[name] = path
            merged[name] = result
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
