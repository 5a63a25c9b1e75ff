"""The watch's idle bookkeeping: at every pass, each listed pod's idle period from its
readings (``podstate.watch.idle``), the events that say when a pod became idle, how long it
has been and what it cost since, and the state file that keeps them
(``podstate.watch.state``).

``podstate.watch.loop`` calls ``Idler.note`` once a pass; the clock (``now``) and the event
writer are given, so tests run it on any times they choose.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from podstate.inventory import actions
from podstate.inventory.podsfile import Pod
from podstate.watch import state, underlock
from podstate.watch.decisions import Event, Sighting
from podstate.watch.idle import (
    Period,
    check_reading,
    container,
    cost_since,
    duration,
    observe,
    pod_clock,
    stop_due,
)

# What a stop costs, by provider, said in each stop's event (docs/cost.md).
STOP_COSTS = {
    "runpod": (
        "a stop wipes the container disk: podstate puts its own state back at the next "
        "start, files outside the volume are gone; a pod on host-local storage may restart "
        "without its GPUs"
    ),
    "vast": (
        "a stop keeps the container disk (Vast): its files stay, its processes and /dev/shm "
        "contents go, and podstate puts its own state back after the next start; a started "
        "instance waits until its GPUs are free again"
    ),
}


def stop_cost(data: dict[str, Any]) -> str:
    """Return what stopping the pod of host data ``data`` costs, in words, for its events."""
    return STOP_COSTS.get(str(data.get("provider")), STOP_COSTS["runpod"])


def started_at(
    data: dict[str, Any], before: Period | None, entry: dict[str, Any] | None
) -> str | None:
    """Return which container start the pod's period is for: the provider's (RunPod's
    ``startedAt``), else the one this pass's check read on the pod (Vast lists none: its
    container start tells a stop and start), else the period's own (a pass without a check
    keeps it)."""
    listed = data.get("started_at")
    if listed is not None:
        return str(listed)
    read = container(entry)
    if read is not None:
        return read
    return before.started_at if before is not None else None


def money(usd: float | None) -> str:
    """Return dollars in words: ``$5.46``, or ``an unknown sum`` for an unknown price."""
    if usd is None:
        return "an unknown sum"
    return f"${usd:.3f}" if 0 < usd < 0.01 else f"${usd:.2f}"


class Idler:
    """Each pod's idle period, across passes and watch restarts (its state file), and the
    stops of pods idle past their ``idle.after`` (``stopper``; none with ``dry_run``), each
    sent under the pod lock once ``guard`` found the pod still idle there."""

    def __init__(
        self,
        path: Path,
        now: Callable[[], datetime],
        gap: float,
        emit: Callable[[Event], None],
        dry_run: bool = False,
        stopper: Callable[[dict[str, Any]], actions.Stopped] = actions.stop,
        guard: Callable[
            [str, dict[str, Any], float], AbstractContextManager[str | None]
        ] = underlock.still_idle,
    ) -> None:
        self.path = path
        self.now = now
        self.gap = gap
        self.emit = emit
        self.dry_run = dry_run
        self.stopper = stopper
        self.guard = guard
        self.periods: dict[str, Period] = state.load(path)

    def note(
        self,
        pods: list[Pod],
        listed: dict[str, Sighting],
        report: dict[str, dict[str, Any]] | None,
        checked: bool,
    ) -> None:
        """Take this pass's readings of the listed ``pods`` (and, where ``checked``, the
        check's ``report``, None when it wrote none: every pod unknown), emit what changed,
        stop the pods whose stop is due (never a held one: ``listed``), and write the state
        file; pods no longer listed are forgotten."""
        now = self.now()
        periods: dict[str, Period] = {}
        for pod in pods:
            data = pod.data
            before = self.periods.get(pod.name)
            entry = (report or {}).get(pod.name)
            period = observe(
                before,
                data.get("pod_id"),
                started_at(data, before, entry if checked else None),
                data.get("live_idle"),
                check_reading(entry),
                checked,
                now,
                self.gap,
                data.get("cost_per_hour"),
                has_live="live_idle" in data,
                pod_since=pod_clock(entry) if checked else None,
            )
            self._events(pod.name, before, period, checked, now)
            config = (data.get("podstate") or {}).get("idle")
            checked_idle = checked and check_reading((report or {}).get(pod.name)) is True
            if config and stop_due(period, config["after"], checked_idle, now):
                period = self._due(pod, listed[pod.name].held, config, period, now)
            periods[pod.name] = period
        self.periods = periods
        try:
            state.save(self.path, periods)
        except state.StateError as e:
            self.emit(Event(None, "state", "none", "failed", detail=str(e)))

    def _events(
        self, name: str, before: Period | None, period: Period, checked: bool, now: datetime
    ) -> None:
        """Emit the pod's idle news: it became idle, its idle period ended (with how long
        it lasted and what it cost), or, at a check pass, how long it has been idle."""
        was = before.since if before is not None else None
        if period.since is not None and (was is None or period.since != was):
            self.emit(self.idle_event(name, period, now, f"since {_clock(period.since)}"))
        elif period.since is not None and checked:
            self.emit(self.idle_event(name, period, now, f"for {idle_for(period, now)}"))
        elif was is not None and period.since is None and before is not None:
            lasted = duration((now - was).total_seconds())
            spent = cost_since(before, now)
            self.emit(
                Event(
                    name,
                    "in use" if period.pod_id == before.pod_id else "new",
                    "none",
                    "idle period over",
                    detail=f"it was idle for {lasted}, {money(spent)} since {_clock(was)}",
                )
            )

    def _due(
        self, pod: Pod, held: str | None, config: dict[str, Any], period: Period, now: datetime
    ) -> Period:
        """Act on a pod idle past ``idle.after``: report it, or stop it (unless it is held,
        this is a dry run, or read again under the pod lock it is busy or not idle); return
        its period, marked tried where a stop was asked for or the report made (once per
        period)."""
        past = f"idle past {duration(config['after'])}"
        price = period.cost_per_hour
        saves = f"saves {money(price)}/h" if price is not None else "saves an unknown sum"
        if config["action"] == "report":
            self.emit(self.idle_event(pod.name, period, now, past))
            return replace(period, attempted=True)
        if held:
            event = self.idle_event(pod.name, period, now, "held")
            self.emit(replace(event, detail=f"{past}, not stopped: {held}"))
            return period
        event = replace(self.idle_event(pod.name, period, now, ""), action="stop")
        if self.dry_run:
            detail = f"{past}: would stop it ({saves}); {stop_cost(pod.data)}"
            self.emit(replace(event, result="dry run", detail=detail))
            return period
        with self.guard(pod.name, pod.data, config["after"]) as why:
            if why is None:
                outcome = self.stopper(pod.data)
        if why is not None:
            event = self.idle_event(pod.name, period, now, "not stopped")
            self.emit(replace(event, detail=f"{past}, not stopped: {why}"))
            return period
        if outcome.ok:
            spent = money(cost_since(period, now))
            detail = f"{past}, {spent} since; {saves}; {stop_cost(pod.data)}"
            self.emit(replace(event, result="ok", detail=detail))
        else:
            detail = f"{outcome.why}; not tried again while it stays idle"
            self.emit(replace(event, result="failed", detail=detail))
        return replace(period, attempted=True)

    def idle_event(self, name: str, period: Period, now: datetime, result: str) -> Event:
        """Return the event that says a pod is idle: since when, and what it cost since."""
        assert period.since is not None
        price = period.cost_per_hour
        shown = "price unknown" if price is None else f"{money(price)}/h"
        spent = cost_since(period, now)
        return Event(
            name,
            "idle",
            "none",
            result,
            detail=f"idle since {_clock(period.since)}, {money(spent)} since ({shown})",
            idle_since=_clock(period.since),
            cost_since=spent,
        )


def idle_for(period: Period, now: datetime) -> str:
    """Return how long the pod has been idle, in words."""
    assert period.since is not None
    return duration((now - period.since).total_seconds())


def _clock(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
