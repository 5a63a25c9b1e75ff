"""Since when a pod is idle: the watch's pure decisions (``podstate.watch.idle``), its
bookkeeping across passes and restarts (``podstate.watch.idler``, ``podstate.watch.state``)
and what ``podstate check --watch-state`` shows. Every time is given: no test reads a clock.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from podstate.check import usage
from podstate.check.result import PodResult
from podstate.inventory import actions
from podstate.inventory.podsfile import Pod
from podstate.watch import state
from podstate.watch.decisions import Event, Sighting
from podstate.watch.idle import Period, check_reading, cost_since, duration, observe, stop_due
from podstate.watch.idler import Idler

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
GAP = 930.0


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def step(before, live, check=None, checked=False, minute=0.0, pod_id="p1", started="s1"):
    return observe(before, pod_id, started, live, check, checked, at(minute), GAP, 2.0)


def test_a_period_starts_at_the_first_idle_reading_and_counts_idle_checks():
    p = step(None, True, minute=0)
    assert (p.since, p.checks) == (at(0), 0)
    p = step(p, True, True, True, minute=1)
    p = step(p, True, minute=2)
    p = step(p, True, True, True, minute=3)
    assert (p.since, p.checks) == (at(0), 2)
    assert cost_since(p, at(60)) == 2.0  # an hour at $2/h


@pytest.mark.parametrize(
    "live, check, checked",
    [(False, None, False), (None, None, False), (True, False, True), (True, None, True)],
    ids=["live in use", "live unknown", "check in use", "check unknown"],
)
def test_any_reading_in_use_or_unknown_ends_the_period(live, check, checked):
    p = step(step(None, True, True, True, minute=0), True, True, True, minute=1)
    p = step(p, live, check, checked, minute=2)
    assert (p.since, p.checks, p.attempted) == (None, 0, False)


def test_after_a_check_in_use_live_readings_alone_start_no_period():
    """The API cannot see a terminal: the check that saw one blocks the live readings."""
    p = step(None, True, False, True, minute=0)
    for minute in (1, 2, 3):
        p = step(p, True, minute=minute)
        assert p.since is None
    p = step(p, True, True, True, minute=4)
    assert (p.since, p.checks) == (at(4), 1)


def test_a_new_container_or_a_long_gap_starts_again():
    p = step(step(None, True, minute=0), True, True, True, minute=1)
    assert step(p, True, minute=2, started="s2").since == at(2)  # restarted
    assert step(p, True, minute=2, pod_id="p2").since == at(2)  # another pod
    assert step(p, True, minute=1 + GAP / 60 + 1).since == at(1 + GAP / 60 + 1)  # not watched


def test_a_pods_file_pod_is_idle_by_its_checks_alone():
    p = observe(None, None, None, None, True, True, at(0), GAP, None, has_live=False)
    p = observe(p, None, None, None, None, False, at(1), GAP, None, has_live=False)
    assert (p.since, p.checks) == (at(0), 1)


def test_a_stop_is_due_after_the_time_two_idle_checks_and_once_per_period():
    p = step(None, True, minute=0)
    p = step(p, True, True, True, minute=15)
    assert not stop_due(p, 900, True, at(15))  # one check
    p = step(p, True, True, True, minute=16)
    assert stop_due(p, 900, True, at(16))
    assert not stop_due(p, 900, False, at(16))  # this pass's check did not say idle
    assert not stop_due(p, 1800, True, at(16))  # not idle long enough
    assert not stop_due(replace(p, attempted=True), 900, True, at(16))


def test_check_readings_busy_is_in_use_and_missing_is_unknown():
    assert check_reading({"status": "ok", "idle": True}) is True
    assert check_reading({"status": "busy", "idle": True}) is False
    assert check_reading({"status": "unreachable", "idle": None}) is None
    assert check_reading(None) is None


def test_durations_in_words():
    assert [duration(s) for s in (45, 720, 7800, 3 * 86400 + 3600)] == [
        "45 s",
        "12 min",
        "2 h 10 min",
        "3 d 1 h",
    ]


LISTED = {n: Sighting(None, ("h", 22), None, None) for n in ("a", "b")}


def pod(name: str, live: bool | None, cost: float | None = 2.99) -> Pod:
    data = {"pod_id": f"id-{name}", "started_at": "2026-06-01T11:00:00Z", "live_idle": live}
    return Pod(name, {**data, "cost_per_hour": cost}, [])


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def test_the_idler_says_when_a_pod_became_idle_and_what_it_cost_since(tmp_path):
    events: list[Event] = []
    clock = Clock()
    path = tmp_path / "state" / "watch.json"
    idler = Idler(path, clock, 36000.0, events.append)
    idler.note([pod("a", True), pod("b", False)], LISTED, None, False)
    (began,) = events
    assert (began.pod, began.seen, began.idle_since) == ("a", "idle", "2026-06-01T12:00:00Z")
    clock.now = at(130)
    report = {"a": {"status": "ok", "idle": True}, "b": {"status": "ok", "idle": False}}
    idler.note([pod("a", True), pod("b", False)], LISTED, report, True)
    assert events[-1].result == "for 2 h 10 min"
    assert events[-1].cost_since == pytest.approx(2.99 * 130 / 60, abs=1e-3)
    assert "$6.48 since" in events[-1].detail
    # a watch started again reads the same period from its state file
    again = Idler(path, clock, 36000.0, events.append)
    assert again.periods["a"].since == T0
    clock.now = at(131)
    again.note([pod("a", False)], LISTED, None, False)
    assert (events[-1].seen, events[-1].result) == ("in use", "idle period over")
    assert "idle for 2 h 11 min" in events[-1].detail
    assert json.loads(path.read_text())["pods"]["a"]["idle_since"] is None
    assert set(json.loads(path.read_text())["pods"]) == {"a"}  # b is no longer listed


def test_a_state_file_that_is_not_one_is_one_line_and_is_left_alone(tmp_path):
    path = tmp_path / "watch.json"
    path.write_text('{"version": 1, "pods": {"a": {"seen": "yesterday"}}}')
    with pytest.raises(state.StateError, match=r"is not a watch state file") as caught:
        Idler(path, Clock(), GAP, lambda e: None)
    assert "\n" not in str(caught.value)
    assert path.read_text().startswith('{"version": 1')


def test_the_check_shows_the_watchs_idle_period(tmp_path):
    path = tmp_path / "watch.json"
    period = Period("id-a", "s", at(130), since=T0, checks=3, cost_per_hour=2.99)
    state.save(path, {"a": period, "b": period, "c": period})
    idle = {"idle": True, "in_use": [], "unknown": []}
    results = {
        "a": PodResult(cost_per_hour=2.0, idle=True, activity=idle),
        "b": PodResult(cost_per_hour=2.0, idle=False, activity={**idle, "idle": False}),
        "c": PodResult(cost_per_hour=2.0, idle=True, activity=idle),
    }
    state.annotate(results, path, at(131))
    assert (results["a"].idle_since, results["a"].cost_since) == ("2026-06-01T12:00:00Z", 4.3667)
    assert usage.use(results["a"]) == "idle since 2026-06-01T12:00:00Z, $4.37 since"
    assert results["b"].idle_since is None  # in use by the check's own reading
    stale = {"c": PodResult(cost_per_hour=2.0, idle=True, activity=idle)}
    state.annotate(stale, path, at(130 + 61))  # no watch wrote it for an hour
    assert stale["c"].idle_since is None
    with pytest.raises(state.StateError, match="no watch state at"):
        state.annotate(results, tmp_path / "missing.json", at(131))


# --- stopping -----------------------------------------------------------------------------

IDLE = {"status": "ok", "idle": True}


@contextmanager
def still_idle(name, data, after):
    """The pod lock taken and the pod read again idle (the end-to-end tests take it for real)."""
    yield None


def stop_pod(live=True, action="stop", after=900) -> Pod:
    data = pod("a", live).data
    return Pod(
        "a",
        {**data, "provider": "runpod", "podstate": {"idle": {"after": after, "action": action}}},
        [],
    )


class Fleet:
    """An Idler over one pod ``a`` at $2.99/h, idle after 15 minutes; its stops recorded."""

    def __init__(self, tmp_path, dry_run=False, outcome=None) -> None:
        self.clock, self.events, self.stops = Clock(), [], []
        self.outcome = outcome or actions.Stopped(True)

        def stopper(data):
            self.stops.append(data["pod_id"])
            return self.outcome

        path = tmp_path / "watch.json"
        self.idler = Idler(path, self.clock, GAP, self.events.append, dry_run, stopper, still_idle)

    def passes(self, minutes, live=True, check=IDLE, held=None, **config) -> None:
        """Run a pass at each of ``minutes``, each a check pass reading ``check``."""
        listed = {"a": Sighting("id-a", ("h", 22), None, held)}
        for minute in minutes:
            self.clock.now = at(minute)
            self.idler.note([stop_pod(live, **config)], listed, {"a": check}, True)


def test_a_pod_idle_past_after_is_stopped_exactly_once(tmp_path):
    fleet = Fleet(tmp_path)
    fleet.passes([0, 5, 10])
    assert fleet.stops == []  # idle for 10 minutes of 15
    fleet.passes([15, 20, 25, 30])
    assert fleet.stops == ["id-a"]
    (stopped,) = [e for e in fleet.events if e.action == "stop"]
    assert (stopped.result, stopped.idle_since) == ("ok", "2026-06-01T12:00:00Z")
    assert "saves $2.99/h" in stopped.detail and "wipes the container disk" in stopped.detail


@pytest.mark.parametrize(
    "live, check, held",
    [
        (False, IDLE, None),  # the API reads a GPU in use
        (True, {"status": "ok", "idle": False}, None),  # a process, a terminal, a kernel
        (True, {"status": "busy", "idle": True, "holder": "x"}, None),  # another run on it
        (None, IDLE, None),  # the API's reading is unknown
        (True, {"status": "unreachable", "idle": None}, None),  # the check's is unknown
        (True, IDLE, "watch.hold in its vars"),
    ],
    ids=["gpu in use", "in use by the check", "busy", "live unknown", "check unknown", "held"],
)
def test_a_pod_in_use_busy_unknown_or_held_is_never_stopped(tmp_path, live, check, held):
    fleet = Fleet(tmp_path)
    fleet.passes(range(0, 120, 5), live=live, check=check, held=held)
    assert fleet.stops == []
    assert not [e for e in fleet.events if e.action == "stop"]


def test_a_dry_run_stops_nothing_and_records_no_attempt(tmp_path):
    fleet = Fleet(tmp_path, dry_run=True)
    fleet.passes([0, 15, 20])
    assert fleet.stops == []
    assert [e.result for e in fleet.events if e.action == "stop"] == ["dry run", "dry run"]
    assert not fleet.idler.periods["a"].attempted


def test_a_refused_stop_is_an_event_and_is_not_tried_again_in_the_period(tmp_path):
    fleet = Fleet(tmp_path, outcome=actions.Stopped(False, "RunPod answered 429"))
    fleet.passes([0, 15, 20, 25])
    assert fleet.stops == ["id-a"]
    (failed,) = [e for e in fleet.events if e.action == "stop"]
    assert failed.result == "failed" and "RunPod answered 429" in failed.detail
    fleet.passes([30], live=False)  # in use again: a new period may try again
    fleet.passes([31, 46, 47])
    assert fleet.stops == ["id-a", "id-a"]


def test_report_only_says_so_once_a_period(tmp_path):
    fleet = Fleet(tmp_path)
    fleet.passes([0, 15, 20, 25], action="report")
    assert fleet.stops == []
    assert [e.result for e in fleet.events].count("idle past 15 min") == 1


# --- the provider's answer to a stop, and the desired state's idle section ----------------


@pytest.mark.parametrize(
    "status, words",
    [(200, None), (409, "allows no stop now"), (403, "403"), (429, "429"), (503, "503")],
)
def test_runpods_answer_to_a_stop(monkeypatch, provider_api, status, words):
    api = provider_api("runpod", key="rpa_test")
    api.queue(status, {"title": "x", "status": status, "detail": "said no"})
    monkeypatch.setenv("RUNPOD_API_URL", api.url)
    monkeypatch.setenv("RUNPOD_API_KEY", api.key)
    outcome = actions.stop({"provider": "runpod", "pod_id": "abc"})
    seen = [(r["path"], json.loads(r["body"]), r["headers"]["Authorization"]) for r in api.requests]
    assert seen == [("/v2/pods/abc/action", {"action": "stop"}, "Bearer rpa_test")]
    assert outcome.ok is (status == 200)
    if words:
        assert words in outcome.why and "said no" in outcome.why and "rpa_test" not in outcome.why


def test_a_pod_of_a_pods_file_cannot_be_stopped():
    assert not actions.stop({"ssh_hostname": "x"}).ok


@pytest.mark.parametrize(
    "idle, words",
    [
        ({"after": "0"}, "is not a duration"),
        ({"after": 0}, "is not above 0"),
        ({"after": -1}, "is not above 0"),
        ({"after": "0s"}, "is not above 0"),
        ({"after": "2 hours"}, "is not a duration"),
        ({"after": "30m\n"}, "is not a duration"),  # a whole match, not up to a newline
        ({"after": "2h", "action": "terminate"}, "terminate"),
    ],
)
def test_a_bad_idle_section_is_one_line(idle, words):
    from podstate.desired.errors import Layer, SpecError
    from podstate.desired.spec import resolve

    with pytest.raises(SpecError) as caught:
        resolve([Layer("group_vars/all.yaml", {"idle": idle})], "pod-1")
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_durations_of_the_idle_section():
    from podstate.desired.errors import Layer
    from podstate.desired.spec import resolve

    layers = [Layer("group_vars/all.yaml", {"idle": {"after": "90s"}})]
    assert resolve(layers, "p")["idle"] == {"after": 90, "action": "report"}
    layers = [Layer("group_vars/all.yaml", {"idle": {"after": "2h", "action": "stop"}})]
    assert resolve(layers, "p")["idle"] == {"after": 7200, "action": "stop"}


# --- one clock for every watch: the idle period the probe keeps on the pod -----------------


CLOCK = Clock()  # the time the watches and the pod's clock read


def vast_pod(after=900) -> Pod:
    """A Vast instance ``a`` (Vast lists no start time), idle after ``after`` seconds."""
    data = {"pod_id": "7", "provider": "vast", "started_at": None, "live_idle": True}
    idle = {"idle": {"after": after, "action": "stop"}}
    return Pod("a", {**data, "cost_per_hour": 0.5, "podstate": idle}, [])


def reading(idle_for: float | None, container="boot:100") -> dict:
    """A check report's entry of an idle pod whose own clock says ``idle_for`` seconds,
    read at the clock's minute."""
    since = None
    if idle_for is not None:
        since = (CLOCK.now - timedelta(seconds=idle_for)).strftime("%Y-%m-%dT%H:%M:%SZ")
    found = {"idle": True, "idle_for": idle_for, "idle_since": since, "container": container}
    return {**IDLE, "activity": found}


class Watches:
    """Idlers over the Vast instance ``a``, each with its state file; their stops recorded."""

    def __init__(self, tmp_path) -> None:
        self.clock, self.stops, self.tmp_path = CLOCK, [], tmp_path
        CLOCK.now = T0

    def idler(self, name: str) -> Idler:
        def stopper(data):
            self.stops.append((name, data["pod_id"]))
            return actions.Stopped(True)

        path = self.tmp_path / f"{name}.json"
        return Idler(path, self.clock, GAP, lambda e: None, stopper=stopper, guard=still_idle)

    def passes(self, idler: Idler, minutes, entry) -> None:
        listed = {"a": Sighting("7", ("h", 22), None, None)}
        for minute in minutes:
            self.clock.now = at(minute)
            idler.note([vast_pod()], listed, {"a": entry(minute)}, True)


def test_after_one_watch_stops_a_pod_and_it_is_started_the_other_does_not_stop_it_at_once(
    tmp_path,
):
    watches = Watches(tmp_path)
    one, other = watches.idler("one"), watches.idler("other")
    watches.passes(other, [0, 1, 10], lambda m: reading(m * 60))  # idle since 12:00
    watches.passes(one, [0.5, 15, 16], lambda m: reading(m * 60))
    assert watches.stops == [("one", "7")]
    # started again at 16:30 (Vast keeps the container disk; /run and process 1 are new)
    entry = lambda m: reading((m - 16.5) * 60, container="boot:9000")  # noqa: E731
    watches.passes(other, [17, 18], entry)
    assert watches.stops == [("one", "7")]
    assert other.periods["a"].since == at(17)
    watches.passes(other, [32], entry)  # idle past 15 minutes since
    assert watches.stops == [("one", "7"), ("other", "7")]


def test_work_the_pod_saw_between_two_checks_begins_the_period_again(tmp_path):
    watches = Watches(tmp_path)
    idler = watches.idler("one")
    watches.passes(idler, [0, 5, 10], lambda m: reading(m * 60))
    watches.passes(idler, [15, 16], lambda m: reading(60))  # a job ran, and ended, at 14:00+
    assert watches.stops == []
    assert idler.periods["a"].since == at(14) + timedelta(minutes=1)


def test_a_vast_stop_and_start_between_passes_restarts_the_clock(tmp_path):
    """Vast lists no start time: the container start the check reads tells the restart,
    even where the pod's clock could not be read."""
    watches = Watches(tmp_path)
    idler = watches.idler("one")
    watches.passes(idler, [0, 5, 10], lambda m: reading(None, container="boot:100"))
    assert idler.periods["a"].started_at == "boot:100"
    watches.passes(idler, [15], lambda m: reading(None, container="boot:5000"))
    assert watches.stops == []
    assert (idler.periods["a"].since, idler.periods["a"].started_at) == (at(15), "boot:5000")
    listed = {"a": Sighting("7", ("h", 22), None, None)}
    watches.clock.now = at(16)
    idler.note([vast_pod()], listed, None, False)  # a pass without a check keeps the container
    assert idler.periods["a"].since == at(15)
