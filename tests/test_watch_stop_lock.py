"""End to end: the watch's idle stop is decided and sent under the pod lock, on a sandbox pod.

The watch's idle bookkeeping (``Idler``) is driven pass by pass with the reports of real
checks of the pod, and a stopper that records each stop request; between the last check
and the stop, another run takes the pod lock, or work starts on the pod. Read again under
the lock, over SSH, the pod is not idle: no stop, and the event says why.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

from podstate.inventory import actions
from podstate.inventory.fleet import load_inventory
from podstate.paths import LOCK
from podstate.run import lock
from podstate.sandbox.ssh import ssh_command
from podstate.watch import underlock
from podstate.watch.decisions import Sighting
from podstate.watch.idler import Idler
from tests.e2e import ROOT, Fleet, check

SANDBOX = {"pods": 1}
NAME = "pod-1"
STOP = {"idle": {"after": "1s", "action": "stop"}}


class Watch:
    """An Idler over the sandbox's pod, its events and stop requests recorded."""

    def __init__(self, fleet: Fleet, tmp_path, monkeypatch) -> None:
        fleet.host_vars(NAME, STOP)
        for key, value in fleet.env().items():
            monkeypatch.setenv(key, value)
        self.fleet, self.tmp_path, self.events, self.stops = fleet, tmp_path, [], []
        self.pods = load_inventory(record_host_keys=False).pods

        def stopper(data):
            self.stops.append(data)
            return actions.Stopped(True)

        passes = iter(range(1, 1000))

        def now() -> datetime:  # each pass a minute later: the watch's period is old enough
            return datetime.now(UTC) + timedelta(minutes=next(passes))

        self.idler = Idler(tmp_path / "watch.json", now, 900.0, self.events.append, False, stopper)

    def checked(self) -> dict:
        """Return a real check's report of the pod (its probe keeps the pod's idle clock)."""
        report = self.tmp_path / "check.json"
        result = check(self.fleet, "--json", str(report))
        assert result.returncode in (0, 2), result.stdout + result.stderr  # 2: drift
        return json.loads(report.read_text())["pods"]

    def idle_twice(self) -> dict:
        """Note checks until two in a row read the pod idle (the work of a test before ends
        a period), all but the last; return the last check's report."""
        reports = [self.checked()]
        while len(reports) < 6 and [r[NAME]["idle"] for r in reports[-2:]] != [True, True]:
            self.note(reports[-1])
            reports.append(self.checked())
        assert [r[NAME]["idle"] for r in reports[-2:]] == [True, True], [
            r[NAME]["activity"]["in_use"] for r in reports
        ]
        return reports[-1]

    def note(self, report: dict) -> None:
        listed = {NAME: Sighting(None, ("127.0.0.1", 22), None, None)}
        self.idler.note(self.pods, listed, report, True)

    def stop_events(self) -> list:
        return [e for e in self.events if e.action == "stop"]


def test_a_pod_whose_lock_another_run_holds_is_not_stopped(fleet: Fleet, tmp_path, monkeypatch):
    watch = Watch(fleet, tmp_path, monkeypatch)
    report = watch.idle_twice()
    held = lock.guarded(
        "echo taken; read -r _ || :", release=True, token="other", owner="a person's run"
    )
    other = subprocess.Popen(
        [*ssh_command(NAME), held], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        taken = other.stdout.readline()
        assert taken == "taken\n", taken  # the other run holds the pod lock
        watch.note(report)  # a stop due, after the check
    finally:
        other.communicate("")
    assert watch.stops == [] and watch.stop_events() == [], watch.events
    (event,) = [e for e in watch.events if e.result == "not stopped"] or [watch.events]
    assert "not stopped: busy: another podstate run holds this pod (a person's run)" in (
        event.detail
    ), event
    assert fleet.ssh(NAME, f"test -e {LOCK}").returncode == 1  # the other run let it go


def test_work_started_after_the_check_is_seen_under_the_lock(fleet: Fleet, tmp_path, monkeypatch):
    watch = Watch(fleet, tmp_path, monkeypatch)
    report = watch.idle_twice()
    pid = fleet.out(NAME, "nohup sleep 600 </dev/null >/dev/null 2>&1 & echo $!").strip()
    try:
        watch.note(report)  # a stop due, the check said idle: the job started since
    finally:
        fleet.out(NAME, f"kill {pid}")
    assert watch.stops == [] and watch.stop_events() == [], watch.events
    (event,) = [e for e in watch.events if e.result == "not stopped"] or [watch.events]
    assert f"in use, read again under the pod lock: process sleep (pid {pid})" in event.detail
    assert fleet.ssh(NAME, f"test -e {LOCK}").returncode == 1  # the watch let go of the lock


def test_a_pod_still_idle_under_the_lock_is_stopped_and_the_lock_let_go(
    fleet: Fleet, tmp_path, monkeypatch
):
    watch = Watch(fleet, tmp_path, monkeypatch)
    report = watch.idle_twice()
    seen = []
    stopper = watch.idler.stopper

    def stopper_seeing_the_lock(data):
        seen.append(fleet.out(NAME, f"cat {LOCK}/owner").strip())
        return stopper(data)

    watch.idler.stopper = stopper_seeing_the_lock
    watch.note(report)
    assert len(watch.stops) == 1 and seen == [lock.OWNER], (watch.events, seen)
    (event,) = watch.stop_events()
    assert event.result == "ok", event
    assert fleet.ssh(NAME, f"test -e {LOCK}").returncode == 1


def test_read_again_under_the_lock_only_a_quiet_old_enough_period_is_idle():
    assert underlock.verdict(["work.age 500"], 1.0) is None
    assert "began again 0 s ago" in underlock.verdict(["work.age 0"], 1.0)
    busy = underlock.verdict(["work.busy new 42 =sleep", "work.age 0"], 1.0)
    assert busy == (
        "in use, read again under the pod lock: process sleep (pid 42) started since the idle"
        " period began"
    )
    unread = underlock.verdict(["work.unread 7 =job", "work.age 500"], 1.0)
    assert unread == "what job (pid 7) does cannot be read"
    assert "could not be read" in underlock.verdict(["work.unkept", "work.age 0"], 1.0)
    assert "could not be read" in underlock.verdict([], 1.0)  # no clock at all: unknown
    assert "could not be read" in underlock.verdict(["work.busy odd 1 =x"], 1.0)


def test_a_refused_lock_says_who_holds_it_or_why_it_cannot_be_taken():
    held = "podstate: skipped: another podstate run holds this pod (ci pid 9); try again when"
    assert underlock._refused(["x", held]) == "busy: another podstate run holds this pod (ci pid 9)"
    assert underlock._refused([]) == "the pod lock could not be taken: the pod gave no answer"


DIES = """
import sys
from podstate.inventory.fleet import load_inventory
from podstate.watch import underlock

(pod,) = load_inventory(record_host_keys=False).pods
with underlock.still_idle(pod.name, pod.data, 1.0) as why:
    print(why, flush=True)
    sys.stdin.read()  # the stop request, never answered: the watch is killed here
"""


def test_a_watch_killed_while_it_holds_the_lock_lets_go_with_its_connection(
    fleet: Fleet, tmp_path, monkeypatch
):
    Watch(fleet, tmp_path, monkeypatch).idle_twice()
    dying = subprocess.Popen(
        [sys.executable, "-c", DIES],
        cwd=ROOT,
        env=fleet.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert dying.stdout.readline() == "None\n"  # still idle, the lock held
        assert fleet.out(NAME, f"cat {LOCK}/owner").startswith(socket.gethostname())
    finally:
        dying.kill()
        dying.communicate()
    deadline = time.monotonic() + 30
    while fleet.ssh(NAME, f"test -e {LOCK}").returncode == 0:
        assert time.monotonic() < deadline, "the lock outlived the watch's connection"
        time.sleep(0.1)
