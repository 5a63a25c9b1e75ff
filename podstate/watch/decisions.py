"""What ``podstate watch`` decides at each pass, as pure functions of what it saw.

A pass lists the pods (``podstate.inventory.fleet``), and on a check pass reads the drift check's
report; from those and from what earlier passes saw, these functions say which pods need an
apply and why, when a pod that failed may be tried again, which pods an apply's pyinfra
output says succeeded, and how each event is written. ``podstate.watch.loop`` runs the processes
and the clock; nothing here does either, so every decision is unit-tested.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from podstate.inventory import hostkeys
from podstate.inventory.podsfile import Pod
from podstate.terminal import visible

# Why a pod needs an apply, from the listing alone.
NEW = "new"  # never seen by this watch, or another pod (a new pod id) under a known name
RESTARTED = "restarted"  # its container started again: RunPod's startedAt moved
MOVED = "moved"  # its SSH address (ssh_hostname, ssh_port) changed
# The check's statuses that an apply puts right, and those that are failures (backoff).
APPLY_STATUSES = ("drift", "restarted")
FAILED_STATUSES = ("unreachable", "error")
BUSY = "busy"  # another run held the pod lock: left alone for this pass, tried at the next
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# pyinfra's lines about a pod's progress, which say nothing about why it failed
_PROGRESS = re.compile(
    r"^(Connected|Ready: .*|No changes|Skipped|Success|Error: executed \d+ commands?)$"
)


@dataclass(frozen=True)
class Sighting:
    """One pod as a pass listed it: what tells a new, restarted or moved pod, and whether
    the watch may change it."""

    pod_id: str | None
    address: tuple[str, int]
    started_at: datetime | str | None
    held: str | None  # why the watch leaves the pod alone; None: it may apply


def sighting(pod: Pod, exclude: Iterable[str] = ()) -> Sighting:
    """Return what a pass keeps of ``pod``: its pod id, address and ``startedAt`` (host data
    of the RunPod inventory; a pods file has neither id nor start time), and why it is held:
    ``watch: {hold: true}`` in its vars, or a ``--exclude`` name or glob matching it."""
    data = pod.data
    held = None
    if ((data.get("podstate") or {}).get("watch") or {}).get("hold"):
        held = "watch.hold in its vars"
    elif any(fnmatch.fnmatchcase(pod.name, pattern) for pattern in exclude):
        held = "--exclude"
    started = data.get("started_at")
    if isinstance(started, str):
        try:
            started = hostkeys.parse_time(started)  # the same instant, however it is written
        except ValueError:
            pass
    address = (str(data.get("ssh_hostname") or pod.name), int(data.get("ssh_port") or 22))
    return Sighting(data.get("pod_id"), address, started, held)


def changed(known: dict[str, Sighting], listed: dict[str, Sighting]) -> dict[str, str]:
    """Return the listed pods that need an apply because of what the listing shows, each
    with why: ``new`` (never seen by this watch, or a new pod id under a known name),
    ``restarted`` (``startedAt`` is not the one last seen: RunPod re-created the container,
    which wipes what podstate made) or ``moved`` (another address). ``known`` is each pod's
    last sighting in any earlier pass, so a pod that comes back after a stop is compared
    with what it was, not taken for new."""
    reasons: dict[str, str] = {}
    for name, now in listed.items():
        before = known.get(name)
        if before is None or before.pod_id != now.pod_id:
            reasons[name] = NEW
        elif before.started_at != now.started_at:
            reasons[name] = RESTARTED
        elif before.address != now.address:
            reasons[name] = MOVED
    return reasons


@dataclass
class Pending:
    """A pod that needs an apply: why, how many tries failed in a row, and the first pass
    it may be tried in."""

    why: str
    failures: int = 0
    due: int = 0
    error: str | None = None  # the last failure's reason


def next_try(failures: int, now: int, cap: int) -> int:
    """Return the pass a pod is tried again in after its ``failures``-th failure in a row
    in pass ``now``: 2, 4, 8, ... passes later, at most ``cap`` passes later (the
    ``--max-backoff`` in passes). A first failure skips one pass, so a pod that keeps
    failing never takes a run from the others every pass."""
    backoff: int = 2 ** min(failures, 62)  # failures >= 0: a whole number of passes
    return now + min(backoff, max(cap, 1))


RETRY_AFTER_MAX = 3600.0  # the longest Retry-After the watch honours, in seconds


def listing_delay(
    failures: int, interval: float, max_backoff: float, retry_after: float | None
) -> float:
    """Return the seconds from the start of a pass whose listing failed, the ``failures``-th
    in a row, to the next pass: ``interval`` times 2, 4, 8, ..., at most ``max_backoff``
    (never less than ``interval``), and never less than the API asked (``retry_after``, up
    to ``RETRY_AFTER_MAX``). A rate-limited or failing API is asked less often, not at every
    interval whatever it said."""
    backoff = min(interval * 2.0 ** min(failures, 62), max(max_backoff, interval))
    return max(backoff, min(retry_after or 0.0, RETRY_AFTER_MAX))


def from_report(
    report: dict[str, dict[str, Any]], listed: Iterable[str]
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Return what a check report (``podstate check --json``'s ``pods``) says of the listed
    pods it covers: those that need an apply (their status: drift, restarted, or a violation
    with changes, which an apply fixes as far as it can), those that failed (unreachable,
    error) with their error, and every covered pod's status. A busy pod (another run is
    changing it) is in none but the last: the watch leaves it for this pass (``busy``).

    A status the watch does not know needs no apply and is a failure, so it is named rather
    than taken for fine. A listed pod the report lacks (listed between the two) is in none.
    """
    apply: dict[str, str] = {}
    failed: dict[str, str] = {}
    statuses: dict[str, str] = {}
    for name in listed:
        entry = report.get(name)
        if entry is None:
            continue
        status = str(entry.get("status"))
        statuses[name] = status
        if status in APPLY_STATUSES or (status == "violation" and entry.get("changes")):
            apply[name] = status
        elif status in FAILED_STATUSES:
            failed[name] = str(entry.get("error") or status)
        elif status not in ("ok", "violation", BUSY):
            failed[name] = f"the check reported status {status!r}, which watch does not know"
    return apply, failed, statuses


def busy(report: dict[str, dict[str, Any]], statuses: dict[str, str]) -> dict[str, str]:
    """Return the pods a check report found busy, each with why the watch leaves it alone
    for this pass: the run that holds its lock, which is changing it."""
    return {
        name: f"another podstate run is changing it ({report[name].get('holder')}); "
        "it is checked again at the next pass"
        for name, status in statuses.items()
        if status == BUSY
    }


def violation_text(entry: dict[str, Any]) -> str:
    """Return a check report entry's violations as one line."""
    return "; ".join(str(v.get("message")) for v in entry.get("violations") or []) or "violation"


def apply_outcomes(
    pods: list[str], returncode: int, stdout: str, stderr: str
) -> dict[str, str | None]:
    """Return, for each pod an apply was limited to, None when it succeeded, else why not.

    From pyinfra's ``--json`` output: a pod in ``failed_hosts`` or in an operation's
    ``error`` list failed; one that is in no operation at all was not run (pyinfra leaves
    unreachable pods out), which is a failure too. Without that output (pyinfra stopped
    early: every pod failed or was unreachable, a deploy file raised) every pod failed. The
    reason is the pod's first ``[pod] ...`` line of pyinfra's stderr that is not progress
    (``Connected``, ``No changes``, ...): a command's error, ``Could not connect (...)``, a
    violation, the lock's holder; else pyinfra's last line.
    """
    lines = [_ANSI.sub("", line).strip() for line in stderr.splitlines()]
    lines = [line for line in lines if line]
    fallback = lines[-1] if lines else f"pyinfra exited with status {returncode}"
    said: dict[str, str] = {}
    for line in lines:
        match = re.match(r"^\[([^\]]+)\]\s*(.+)$", line)
        if match and match.group(1) in pods and not _PROGRESS.match(match.group(2)):
            said.setdefault(match.group(1), match.group(2))  # the first: the cause
    try:
        results = json.loads(stdout)["results"]
        failed = set(results["failed_hosts"])
        ran: set[str] = set()
        for op in results["operations"]:
            failed.update(op["error"])
            ran.update(op["success"], op["no_change"], op["error"])
    except (ValueError, KeyError, TypeError):
        return {pod: said.get(pod, fallback) for pod in pods}
    outcomes: dict[str, str | None] = {}
    for pod in pods:
        if pod in failed:
            outcomes[pod] = said.get(pod, fallback)
        elif pod not in ran:
            outcomes[pod] = said.get(pod, "pyinfra ran nothing on it")
        else:
            outcomes[pod] = None
    if returncode != 0 and not any(outcomes.values()):  # failed, but no pod says how
        return {pod: fallback for pod in pods}
    return outcomes


def limit_pattern(name: str, groups: set[str]) -> str:
    """Return the ``--limit`` value that selects the pod ``name`` alone.

    pyinfra reads a ``--limit`` as a group name first: a pod named like a group would bring
    the whole group in, held pods included. A glob is never a group name, and ``[x]rest``
    matches exactly the host named ``xrest`` (host names hold no glob characters).
    """
    return f"[{name[0]}]{name[1:]}" if name in groups else name


def summary(
    source: str,
    listed: dict[str, Sighting],
    results: dict[str, str | None],
    pending: dict[str, Pending],
    number: int,
) -> str:
    """Return the detail of pass ``number``'s own line: how many pods it listed from
    ``source``, what its apply did (``results``: each pod's error, None for ok), how many
    are held, and who waits for a later pass."""
    ok = sum(error is None for error in results.values())
    waiting = sorted(f"{name} (pass {p.due})" for name, p in pending.items() if p.due > number)
    held = sum(1 for s in listed.values() if s.held)
    parts = [f"{len(listed)} pods from the {source}"]
    if results:
        parts.append(f"applied to {len(results)}: {ok} ok, {len(results) - ok} failed")
    if held:
        parts.append(f"{held} held")
    if waiting:
        parts.append(f"waiting: {', '.join(waiting)}")
    return "; ".join(parts)


def exit_code(statuses: Iterable[str]) -> int:
    """Return the fleet's exit status from its pods' statuses after a pass, as the check
    does: 1 when any pod failed, has a violation or was unreachable, else 2 for drift (or a
    restart) left or a pod another run is changing (busy), else 0."""
    statuses = set(statuses)
    if statuses - {"ok", BUSY, *APPLY_STATUSES}:
        return 1
    return 2 if statuses & {BUSY, *APPLY_STATUSES} else 0


@dataclass(frozen=True)
class Event:
    """One line of the watch's output: a pod (None for the fleet), what the watch saw, what
    it did, the result, how long it took, and a detail (an error, why a pod is held); an
    idle pod's events say since when it has been idle and what it has cost since."""

    pod: str | None
    seen: str
    action: str
    result: str
    seconds: float = 0.0
    detail: str | None = None
    idle_since: str | None = None  # RFC 3339, UTC
    cost_since: float | None = None  # USD since idle_since, at the pod's price now

    def as_dict(self, time: str, number: int) -> dict[str, Any]:
        """Return the event as ``--json`` writes it, one object a line: stable keys."""
        return {
            "time": time,
            "pass": number,
            "pod": self.pod,
            "seen": self.seen,
            "action": self.action,
            "seconds": round(self.seconds, 1),
            "result": self.result,
            "detail": self.detail,
            "idle_since": self.idle_since,
            "cost_since": self.cost_since,
        }

    def line(self, time: str, number: int, as_json: bool) -> str:
        """Return the event as one line: JSON, or text such as ``2026-06-01T12:00:04Z #3
        pod-2 drift -> apply: ok (4.1s)``, the detail after a colon, its control
        characters escaped and its line breaks joined (text from pods is in it)."""
        if as_json:
            return json.dumps(self.as_dict(time, number)) + "\n"
        text = f"{time} #{number} {self.pod or '*'} {self.seen} -> {self.action}: {self.result}"
        text += f" ({self.seconds:.1f}s)"
        if self.detail:
            text += ": " + visible(" ".join(self.detail.split("\n")))
        return text + "\n"
