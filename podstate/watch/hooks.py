"""What a pass of ``podstate watch`` tells the outside: notifications
(``podstate.watch.notify``) and metrics (``podstate.watch.metrics``).

The loop tells ``Hooks`` each event it emits (``event``) and, once a pass that listed the
pods has applied, what it saw (``passed``: its pods, its check's report, each pod's status);
at the pass's own line, ``Hooks`` hands one ``Pass`` record to each consumer. The record is
made of what the pass already knew: no consumer runs a command on a pod or asks an API.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from podstate.inventory.podsfile import Pod
from podstate.providers.podsfile import PODS_FILE
from podstate.watch.decisions import Event, Pending, Sighting
from podstate.watch.idler import Idler

# The check's statuses whose report entry says what the probe read (violations included):
# an unreachable, erring or busy pod's entry says nothing of its violations.
READ = ("ok", "drift", "restarted", "violation")


@dataclass(frozen=True)
class PodView:
    """One listed pod as a pass left it: its last known status (the check's, or its apply's
    since; None before either), provider, groups, price, whether it is idle now (the watch's
    idle period), and the violations this pass's check read (id to message; None when it
    read none: no check this pass, or the pod could not be read)."""

    status: str | None
    provider: str
    groups: tuple[str, ...]
    cost_per_hour: float | None = None
    idle: bool = False
    violations: dict[str, str] | None = None


@dataclass(frozen=True)
class Applied:
    """One pod's apply in a pass: why it was applied (``new``, ``restarted``, a check
    status), its error (None: it succeeded), how long the apply took, whether it is the
    first failure in a row, and, for a restart put back, the seconds from the container's
    start to its ready marker (None when no start time is known: a pods file, Vast)."""

    pod: str
    why: str
    error: str | None
    seconds: float
    first_failure: bool = False
    ready_after: float | None = None


@dataclass(frozen=True)
class Pass:
    """What one pass saw and did, for the consumers: its number, when it ended (seconds
    since the epoch) and how long it took, each listed pod, its check's report (the pods'
    entries; None without a check), its applies, the idle pods it stopped (with their
    price), and the pods unreachable now, each with the pass it has been so since."""

    number: int
    time: float
    seconds: float
    pods: dict[str, PodView]
    report: dict[str, dict[str, Any]] | None = None
    applied: tuple[Applied, ...] = ()
    stopped: tuple[tuple[str, float | None], ...] = ()
    unreachable: dict[str, int] | None = None


class Consumer(Protocol):
    """A consumer of the watch's passes: notifications, metrics."""

    def passed(self, seen: Pass) -> None: ...


class Watch(Protocol):
    """What the hooks read of the watch (``podstate.watch.loop.Watch``): the pass running,
    the pods it listed, their sightings, the pods waiting for an apply, the idle periods."""

    number: int
    present: set[str]
    known: dict[str, Sighting]
    pending: dict[str, Pending]
    idler: Idler


class Hooks:
    """The watch's consumers, and what the pass in progress told them so far."""

    def __init__(
        self,
        consumers: list[Consumer],
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.consumers = consumers
        self.now = wall
        self.events: list[tuple[Event, datetime]] = []  # this pass's, as they came
        self.seen: Pass | None = None  # this pass's record, once it applied
        self.status: dict[str, str] = {}  # each pod's last known status
        self.since: dict[str, int] = {}  # the unreachable pods: since which pass

    def event(self, event: Event) -> None:
        """Take one event of the pass; at the pass's own line, hand its record on (a
        fleet's event within the pass, such as a check that wrote no report, is no end)."""
        if not self.consumers:
            return
        now = self.now()
        if event.pod is not None:
            self.events.append((event, now))
        if event.pod is not None or event.seen != "pass":
            return
        seen, self.seen, self.events = self.seen, None, []
        if seen is None:
            return  # a pass that could not list the pods: nothing to say of them
        done = replace(seen, time=now.timestamp(), seconds=event.seconds)
        for consumer in self.consumers:
            try:
                consumer.passed(done)
            except Exception as e:  # a hook's failure is never the pass's: one line
                why = f"{type(consumer).__name__} failed on pass {done.number}: {e!r}"
                print(f"podstate: {why}", file=sys.stderr, flush=True)

    def passed(
        self,
        watch: Watch,
        pods: list[Pod],
        report: dict[str, dict[str, Any]] | None,
        statuses: dict[str, str],
    ) -> None:
        """Take what a pass saw once it applied: the ``pods`` listed (those it watches:
        ``watch.present``), its check's ``report`` (None: none), each pod's status after the
        pass (``statuses``)."""
        if not self.consumers:
            return
        pods = [pod for pod in pods if pod.name in watch.present]
        applied = self._applied(watch)
        statuses = dict(statuses)
        for each in applied:
            statuses[each.pod] = _after(each)
        names = {pod.name for pod in pods}
        self.status = {n: s for n, s in {**self.status, **statuses}.items() if n in names}
        for name in list(self.since):
            if self.status.get(name) != "unreachable":
                del self.since[name]
        for name, status in self.status.items():
            if status == "unreachable":
                self.since.setdefault(name, watch.number)
        views = {pod.name: self._view(pod, watch, report) for pod in pods}
        stopped = tuple(
            (e.pod, _price(watch, e.pod))
            for e, _ in self.events
            if e.pod and (e.seen, e.action, e.result) == ("idle", "stop", "ok")
        )
        self.seen = Pass(watch.number, 0.0, 0.0, views, report, applied, stopped, dict(self.since))

    def _applied(self, watch: Watch) -> tuple[Applied, ...]:
        """Return this pass's applies, from its events."""
        found = []
        for event, when in self.events:
            if event.action != "apply" or event.result not in ("ok", "failed") or not event.pod:
                continue
            error = (event.detail or "failed") if event.result == "failed" else None
            pending = watch.pending.get(event.pod)
            first = error is not None and pending is not None and pending.failures == 1
            ready = None
            if error is None and event.seen == "restarted":
                ready = _ready_after(watch, event.pod, when)
            found.append(Applied(event.pod, event.seen, error, event.seconds, first, ready))
        return tuple(found)

    def _view(self, pod: Pod, watch: Watch, report: dict[str, dict[str, Any]] | None) -> PodView:
        """Return ``pod`` as the pass left it."""
        entry = (report or {}).get(pod.name)
        violations = None
        if entry is not None and entry.get("status") in READ:
            violations = {str(v.get("id")): str(v.get("message")) for v in entry["violations"]}
        period = watch.idler.periods.get(pod.name)
        return PodView(
            self.status.get(pod.name),
            provider(pod.data),
            tuple(pod.groups),
            _number(pod.data.get("cost_per_hour")),
            period is not None and period.since is not None,
            violations,
        )


def provider(data: dict[str, Any]) -> str:
    """Return the provider of a pod of host data ``data``: the one it names, else the pods
    file's (``file``)."""
    return str(data.get("provider") or PODS_FILE.name)


def _after(applied: Applied) -> str:
    """Return a pod's status after its apply: ok, or error; unreachable for a failed try
    of a pod the check found unreachable."""
    if applied.error is None:
        return "ok"
    return "unreachable" if applied.why == "unreachable" else "error"


def _ready_after(watch: Watch, pod: str, when: datetime) -> float | None:
    """Return the seconds from ``pod``'s container start (the listing's ``startedAt``) to
    ``when`` its apply wrote the ready marker; None when no start time is known, or it is
    later (another clock)."""
    sighting = watch.known.get(pod)
    started = sighting.started_at if sighting is not None else None
    if not isinstance(started, datetime):
        return None
    seconds = (when - started).total_seconds()
    return seconds if seconds >= 0 else None


def _price(watch: Watch, pod: str) -> float | None:
    """Return the price per hour the watch knows of ``pod`` (its idle period's)."""
    period = watch.idler.periods.get(pod)
    return period.cost_per_hour if period is not None else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
