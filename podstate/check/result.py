"""The check's result model: the verdict on each pod (``PodResult``), the fleet's summary and
exit status, and the JSON report (``schema/check-report.schema.json``) both ways.

``podstate.check.runner`` produces the results; the reports (``podstate.check.reports``,
``podstate.check.markdown``) and the merge of shard reports (``podstate.check.merge``) read
them. The JSON form is written (``to_json``) and read back (``from_json``) here only, so a
field added to the report is added once.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from podstate.check.shards import Shard
from podstate.inventory import hostkeys

STATUSES = ("ok", "drift", "restarted", "busy", "violation", "unreachable", "error")
# 2: violation ids, waived findings, stale waivers; 3: the status restarted (out of drift),
# restarted, ready; 4: the status busy, holder, and the price and use (cost_per_hour, idle,
# activity, idle_since, cost_since; the summary's cost_per_hour, cost_unknown); 5: shard;
# 6: checked_at.
# Fields are never removed or renamed; a version may add a status (docs/reports.md,
# "Compatibility").
FORMAT_VERSION = 6
# Statuses the exit status 2 stands for: an apply would change the pod, or one is changing it
CHANGING = ("drift", "restarted", "busy")
HOST_KEY_COUNTS = {
    hostkeys.VERIFIED: "verified",
    hostkeys.FIRST_USE: "first_use",
    hostkeys.REKEYED: "rekeyed",
    hostkeys.REFUSED: "refused",
}


@dataclass
class PodResult:
    """The check's verdict on one pod."""

    status: str = "ok"
    changes: list[dict[str, Any]] = field(default_factory=list)
    violations: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    checked: list[str] = field(default_factory=list)  # podstate's roles, then other files
    waived: list[dict[str, Any]] = field(default_factory=list)  # violations a waiver holds
    stale_waivers: list[str] = field(default_factory=list)  # expired, or matching nothing
    host_key: dict[str, Any] | None = None  # hostkeys.outcome: None without podstate's store
    restarted: dict[str, Any] | None = None  # applied_at, since: re-created since an apply
    ready: bool = False  # the pod's ready marker is for this desired state
    boot: dict[str, Any] | None = None  # the boot hook at this container's start (roles/boot)
    holder: str | None = None  # busy: the owner line of the run holding the pod lock
    cost_per_hour: float | None = None  # the provider's price, USD per hour; None: unknown
    idle: bool | None = None  # in use now (False), idle (True), or unknown (None)
    activity: dict[str, Any] | None = None  # facts.activity.read: the readings behind idle
    idle_since: str | None = None  # check --watch-state: since when the watch has it idle
    cost_since: float | None = None  # USD since idle_since, at its price now

    def to_json(self) -> dict[str, Any]:
        """Return the pod's entry of the JSON report; a change that uploads a secret is
        there without its diff, like in every report."""
        return {
            "status": self.status,
            "changes": [
                {k: v for k, v in change.items() if k != "diff"} if change.get("secret") else change
                for change in self.changes
            ],
            "violations": self.violations,
            "error": self.error,
            "holder": self.holder,
            "host_key": self.host_key,
            "waived": self.waived,
            "stale_waivers": self.stale_waivers,
            "restarted": self.restarted,
            "ready": self.ready,
            "boot": self.boot,
            "cost_per_hour": self.cost_per_hour,
            "idle": self.idle,
            "activity": self.activity,
            "idle_since": self.idle_since,
            "cost_since": self.cost_since,
        }

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> PodResult:
        """Return the PodResult a pod's entry of a JSON report describes, for the report
        writers (a merge of shard reports).

        The JSON report does not list the roles a pod was checked for (``checked``); the
        roles its changes and violations name stand in for them, so JUnit still has a case
        per failing role, and a pod with no finding gets one passing ``podstate check`` case.
        """
        changes = list(entry.get("changes") or [])
        violations = list(entry.get("violations") or [])
        checked = list(dict.fromkeys([c["role"] for c in changes + violations]))
        if entry.get("status") in ("ok", "drift", "restarted", "violation") and not checked:
            checked = ["podstate check"]
        return cls(
            status=entry["status"],
            changes=changes,
            violations=violations,
            error=entry.get("error"),
            holder=entry.get("holder"),
            checked=checked,
            waived=list(entry.get("waived") or []),
            stale_waivers=list(entry.get("stale_waivers") or []),
            host_key=entry.get("host_key"),
            restarted=entry.get("restarted"),
            ready=bool(entry.get("ready")),
            boot=entry.get("boot"),
            cost_per_hour=entry.get("cost_per_hour"),
            idle=entry.get("idle"),
            activity=entry.get("activity"),
            idle_since=entry.get("idle_since"),
            cost_since=entry.get("cost_since"),
        )


def exit_code(results: dict[str, PodResult]) -> int:
    """Return 0 when every pod is ok, 2 for drift, a restart or a pod another run is changing
    (busy: check again later) and nothing worse, 1 otherwise."""
    statuses = {r.status for r in results.values()}
    if statuses & {"violation", "unreachable", "error"}:
        return 1
    return 2 if statuses & set(CHANGING) else 0


def summary(results: dict[str, PodResult]) -> dict[str, int]:
    """Return how many pods have each status, plus the exit code."""
    counts = {status: 0 for status in STATUSES}
    for result in results.values():
        counts[result.status] += 1
    return {"pods": len(results), **counts, "exit_code": exit_code(results)}


def fleet_cost(results: dict[str, PodResult]) -> tuple[float | None, int]:
    """Return what the pods cost together, in USD per hour, and how many pods have no
    known price: the total is None when any price is unknown (never a sum that leaves
    pods out), and a fleet of no pods costs 0."""
    unknown = sum(1 for result in results.values() if result.cost_per_hour is None)
    if unknown:
        return None, unknown
    return round(sum(r.cost_per_hour or 0.0 for r in results.values()), 6), 0


def host_key_counts(results: dict[str, PodResult]) -> dict[str, int]:
    """Return how many pods had a new key verified against RunPod's log, trusted on first
    use, re-keyed (unverified), or refused."""
    counts = dict.fromkeys(HOST_KEY_COUNTS.values(), 0)
    for result in results.values():
        key = HOST_KEY_COUNTS.get((result.host_key or {}).get("trust") or "")
        if key:
            counts[key] += 1
    return counts


def to_json(
    results: dict[str, PodResult], shard: Shard | None = None, checked_at: str | None = None
) -> dict[str, Any]:
    """Return the JSON report of ``results``: the stable document of
    schema/check-report.schema.json, pods in name order, with the summary, the shard they
    are (None: the whole fleet), which a merge of shard reports reads to tell that one is
    missing, and when they were read (``stamp``; left out when unknown), so that a page or
    a report kept somewhere says how old it is."""
    return {
        "format_version": FORMAT_VERSION,
        **({} if checked_at is None else {"checked_at": checked_at}),
        "shard": None if shard is None else {"index": shard.index, "count": shard.count},
        "pods": {name: result.to_json() for name, result in sorted(results.items())},
        "summary": {
            **summary(results),
            "host_keys": host_key_counts(results),
            "cost_per_hour": fleet_cost(results)[0],
            "cost_unknown": fleet_cost(results)[1],
        },
    }


def stamp(seconds: float) -> str:
    """Return the time ``seconds`` since the epoch as a report's ``checked_at`` says it: UTC,
    ISO 8601 to the second (``2026-12-05T10:02:03Z``), which sorts as the times do."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def from_json(document: dict[str, Any]) -> dict[str, PodResult]:
    """Return the results a JSON report holds (one ``problem`` found none in), by pod name;
    the summary is left out, since it is recomputed from the pods."""
    return {name: PodResult.from_json(entry) for name, entry in document["pods"].items()}


def problem(document: Any) -> str | None:
    """Return why ``document`` is not a check report, in one line (None when it is one):
    the first place where it breaks the report's schema, as installed with the package."""
    from jsonschema import Draft202012Validator

    text = resources.files("podstate.schema").joinpath("check-report.schema.json").read_text()
    error = next(iter(Draft202012Validator(json.loads(text)).iter_errors(document)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the document"
    return f"not a podstate check report ({where}: {error.message})"
