"""Since when each pod has been idle, as pure functions of the watch's readings.

At every pass the listing gives a pod's live reading (host data ``live_idle``: the
provider's GPU numbers, no SSH; absent for a pods file), and at a check pass the check gives
its full one (``idle`` in its report: GPUs, compute processes, terminals, notebook kernels).
A pod's idle period starts at the first reading that says idle and lasts while every reading
does, and never before the period the probe keeps on the pod (``pod_clock``: every watch
reads that one clock); it ends at any reading in use or unknown, at a new container start
(another pod id, ``startedAt``, or, where the provider lists none, the container start the
check read), and at a gap between readings longer than ``gap`` (the watch was not
running, or could not list: the pod was not watched, so it is not known idle). After a full
check that said in use, the live readings alone start no period: they cannot see a
terminal, so the next full check that says idle starts it.

A stop is due (``stop_due``) only on a pass whose check says the pod idle, after ``after``
seconds of the period and at least two consecutive full checks in it, once per period.
``podstate.watch.idler`` applies these to the fleet and keeps them in the state file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

MIN_CHECKS = 2  # full checks in a row that must say idle before a stop
BUSY = "busy"  # the check's status of a pod another podstate run is changing: in use


@dataclass(frozen=True)
class Period:
    """What the watch keeps of one pod: which container it is (pod id, ``startedAt``), since
    when it has been idle (None: it is not), how many full checks in a row said idle, whether
    the last full check said it is not idle (``blocked``), when it was last read, its price,
    and whether a stop was tried in this period."""

    pod_id: str | None
    started_at: str | None
    seen: datetime
    since: datetime | None = None
    checks: int = 0
    blocked: bool = False
    cost_per_hour: float | None = None
    attempted: bool = False

    def to_json(self) -> dict[str, Any]:
        """Return the period as the state file keeps it (times in RFC 3339)."""
        return {
            "pod_id": self.pod_id,
            "started_at": self.started_at,
            "seen": _iso(self.seen),
            "idle_since": _iso(self.since) if self.since else None,
            "checks": self.checks,
            "blocked": self.blocked,
            "cost_per_hour": self.cost_per_hour,
            "stop_attempted": self.attempted,
        }

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> Period:
        """Return the period a state file entry holds; ValueError, KeyError or TypeError
        when it is not one."""
        since = entry["idle_since"]
        price = entry["cost_per_hour"]
        return cls(
            pod_id=_text(entry["pod_id"]),
            started_at=_text(entry["started_at"]),
            seen=datetime.fromisoformat(entry["seen"]),
            since=datetime.fromisoformat(since) if since is not None else None,
            checks=int(entry["checks"]),
            blocked=bool(entry["blocked"]),
            cost_per_hour=float(price) if price is not None else None,
            attempted=bool(entry["stop_attempted"]),
        )


def check_reading(entry: dict[str, Any] | None) -> bool | None:
    """Return what a check report's entry says of the pod's use: True idle, False in use (a
    busy pod too: another podstate run is working on it), None unknown (no entry, an
    unreachable pod, a reading that could not be made)."""
    if entry is None:
        return None
    if entry.get("status") == BUSY:
        return False
    idle = entry.get("idle")
    return idle if isinstance(idle, bool) else None


def pod_clock(entry: dict[str, Any] | None) -> datetime | None:
    """Return since when a check report's entry says the pod's own idle period runs (the
    clock the probe keeps on the pod: ``activity.idle_since``), None when it says none."""
    since = ((entry or {}).get("activity") or {}).get("idle_since")
    try:
        return datetime.fromisoformat(since) if isinstance(since, str) else None
    except ValueError:
        return None


def container(entry: dict[str, Any] | None) -> str | None:
    """Return the container start a check report's entry read (``activity.container``), the
    start of a pod whose provider lists none (Vast); None when it read none."""
    found = ((entry or {}).get("activity") or {}).get("container")
    return found if isinstance(found, str) and found else None


def observe(
    before: Period | None,
    pod_id: str | None,
    started_at: str | None,
    live: bool | None,
    check: bool | None,
    checked: bool,
    now: datetime,
    gap: float,
    cost_per_hour: float | None = None,
    has_live: bool = True,
    pod_since: datetime | None = None,
) -> Period:
    """Return the pod's period after this pass's readings: ``live`` (the listing's, unless
    not ``has_live``: a source without live readings) and, where ``checked``, ``check``
    (the full check's); each True idle, False in use, None unknown. ``pod_since``, the
    check's reading of the clock kept on the pod (``pod_clock``), moves a period that began
    earlier to it: the pod saw work this watch did not (another watch's stop and a start, a
    job between two checks), and every watch reads the same clock."""
    fresh = Period(pod_id, started_at, now, cost_per_hour=cost_per_hour)
    if before is None or (before.pod_id, before.started_at) != (pod_id, started_at):
        period = fresh  # a new container: whatever ran before is gone
    elif (now - before.seen).total_seconds() > gap:
        period = replace(fresh, blocked=before.blocked)  # not watched meanwhile
    else:
        period = replace(before, seen=now, cost_per_hour=cost_per_hour)
    readings = ([live] if has_live else []) + ([check] if checked else [])
    if checked:
        period = replace(period, blocked=check is not True)
    if not readings or any(r is not True for r in readings) or period.blocked:
        if readings:  # a reading that is not idle ends the period
            return replace(period, since=None, checks=0, attempted=False)
        return period
    if period.since is None:
        period = replace(period, since=now, checks=0, attempted=False)
    if checked and pod_since is not None and period.since and pod_since > period.since:
        period = replace(period, since=min(pod_since, now), checks=0, attempted=False)
    return replace(period, checks=period.checks + 1) if checked else period


def stop_due(period: Period, after: float, checked_idle: bool, now: datetime) -> bool:
    """Return whether the pod has been idle long enough to stop: this pass's full check
    says idle, the period is ``after`` seconds old and has ``MIN_CHECKS`` checks, and no
    stop was tried in it."""
    return (
        checked_idle
        and period.since is not None
        and (now - period.since).total_seconds() >= after
        and period.checks >= MIN_CHECKS
        and not period.attempted
    )


def cost_since(period: Period, now: datetime) -> float | None:
    """Return what the pod has cost since it became idle, in USD at its price now; None
    when it is not idle or its price is unknown."""
    if period.since is None or period.cost_per_hour is None:
        return None
    return round(period.cost_per_hour * (now - period.since).total_seconds() / 3600, 4)


def duration(seconds: float) -> str:
    """Return a duration in words: ``45 s``, ``12 min``, ``2 h 10 min``, ``3 d 4 h``."""
    seconds = int(max(seconds, 0))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
