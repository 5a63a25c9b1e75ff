"""``podstate watch``: a loop that puts pods back, for an always-on machine or a cron job.

Every ``--interval`` seconds a pass lists the pods the way the inventory does (one
``GET /v2/pods``, or the pods file read again; host keys are not recorded by the listing),
and applies, in one pyinfra run, to the pods that are new, restarted or moved
(``podstate.watch.decisions``). Every ``--check-every`` passes, the first included, it runs the
drift check of the whole fleet instead and applies to the pods found drifted or restarted.
A pod that fails is tried again with exponential backoff, counted in passes; a held pod
(``watch: {hold: true}`` in its vars, or ``--exclude``) is checked and logged, never changed.

The check and the apply are the commands a user runs, as child processes: ``podstate check
--json`` and ``pyinfra -y --json inventories/pods.py DEPLOY... --limit POD...``. They take
the pod lock as any run does, so a watch and a hand-run apply never work on one pod at once.

Signals: the first SIGTERM or SIGINT lets the child in flight finish (it runs in a session
of its own, so a terminal's Ctrl-C does not reach it), then the watch exits 0; a second one
stops it and the child at once. SIGHUP starts the next pass now.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from podstate import signals
from podstate.desired.errors import SpecError
from podstate.inventory.fleet import Inventory, load_inventory
from podstate.watch.decisions import (
    Event,
    Pending,
    Sighting,
    apply_outcomes,
    busy,
    changed,
    exit_code,
    from_report,
    limit_pattern,
    next_try,
    sighting,
    violation_text,
)

INVENTORY = "inventories/pods.py"
_RESET = ("new", "restarted", "moved")  # the pod itself changed: a fresh start, no backoff


class WatchError(Exception):
    """The watch cannot start (a missing file, a bad option): one line."""


@dataclass(frozen=True)
class Options:
    """The command line of ``podstate watch``."""

    deploys: list[str]
    interval: float = 30.0
    check_every: int = 10
    max_backoff: float = 900.0
    exclude: tuple[str, ...] = ()
    json: bool = False
    once: bool = False
    passes: int | None = None  # stop after this many passes (tests; undocumented)


class Watch:
    """The loop's state: what earlier passes saw, the pods waiting for an apply, the child
    process in flight, and the signals received."""

    def __init__(self, options: Options, out: TextIO = sys.stdout) -> None:
        self.options = options
        self.out = out
        self.known: dict[str, Sighting] = {}  # every pod's last sighting
        self.present: set[str] = set()  # the pods the last pass listed
        self.pending: dict[str, Pending] = {}
        self.number = 0  # the pass running, from 1
        self.child: subprocess.Popen | None = None
        self.stopping: int | None = None  # the first stop signal received
        self.woken = False
        self.busy = False  # in a pass: a stop waits for its end
        self._wake_read, self._wake_write = os.pipe()
        for fd in (self._wake_read, self._wake_write):
            os.set_blocking(fd, False)

    # --- the loop ------------------------------------------------------------------------

    def run(self) -> int:
        """Run passes until a signal (exit 0), the ``--passes`` asked for (0), or, with
        ``--once``, one pass (the fleet's status after it: 0, 2 drift left, 1 worse).

        The first listing's SpecError (an invalid desired state, an API that refuses the
        key) propagates: the watch stops before its first pass, with one line."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._stop)
        signal.signal(signal.SIGHUP, self._wake)
        while True:
            started = time.monotonic()
            self.number += 1
            self.busy = True
            status = self.one_pass()
            self.busy = False
            if self.options.once:
                return status
            if self.stopping or self.number == self.options.passes:
                return 0
            self._sleep(started + self.options.interval - time.monotonic())
            if self.stopping:
                return 0

    def one_pass(self) -> int:
        """Run one pass; return the fleet's status after it (``watch_plan.exit_code``)."""
        started = time.monotonic()
        try:
            found = load_inventory(record_host_keys=False)
        except SpecError as e:
            if self.number == 1:
                raise
            self.emit(Event(None, "invalid", "none", "nothing applied", detail=str(e)))
            return 1
        listed = {pod.name: sighting(pod, self.options.exclude) for pod in found.pods}
        reasons = changed(self.known, listed)
        failed: dict[str, str] = {}
        statuses: dict[str, str] = {}
        busy_now: dict[str, str] = {}
        checked = (self.number - 1) % self.options.check_every == 0
        report = self._check() if checked and not self.stopping else None
        if report is not None:
            from_check, failed, statuses = from_report(report, listed)
            reasons = {n: r for n, r in reasons.items() if n not in statuses} | from_check
            for name, status in statuses.items():
                if status == "ok" or (status == "violation" and name not in from_check):
                    self.pending.pop(name, None)  # nothing an apply would do
                if status == "violation" and name not in from_check:
                    self._event(listed, name, status, violation_text(report[name]))
            busy_now = busy(report, statuses)
            for name, why in busy_now.items():
                self.emit(Event(name, "busy", "none", "skipped", detail=why))
        for name in self.present - listed.keys():
            self.pending.pop(name, None)
            self.emit(Event(name, "gone", "none", "ok", detail=f"no longer in the {found.source}"))
        self._note(listed, reasons, failed, statuses)
        results = self._apply_due(listed, found, busy_now) if not self.stopping else {}
        for name, error in results.items():
            statuses[name] = "error" if error else "ok"
        self.known.update(listed)
        self.present = set(listed)
        self._summary(found, checked, results, listed, time.monotonic() - started)
        if checked and report is None:
            return 1  # no report: the fleet's state is unknown
        return exit_code(statuses.values())

    def _event(self, listed: dict[str, Sighting], name: str, seen: str, error: str) -> None:
        """Emit a pod's check finding that no apply fixes: held, or a failure."""
        held = listed[name].held
        self.emit(Event(name, seen, "none", "held" if held else "failed", detail=held or error))

    def _note(
        self,
        listed: dict[str, Sighting],
        reasons: dict[str, str],
        failed: dict[str, str],
        statuses: dict[str, str],
    ) -> None:
        """Record what this pass found: pods to apply to (held ones logged instead), and
        failures of the check (counted as failed tries, so they back off too)."""
        for name, why in reasons.items():
            if listed[name].held:
                self.pending.pop(name, None)
                self.emit(Event(name, why, "none", "held", detail=listed[name].held))
                continue
            before = self.pending.get(name)
            if before is None or why in _RESET:
                self.pending[name] = Pending(why)
            else:
                before.why = why
        for name, error in failed.items():
            if listed[name].held:
                self._event(listed, name, statuses[name], error)
                continue
            pending = self.pending.setdefault(name, Pending(statuses[name]))
            self._failed(name, pending, error, "none")

    def _failed(self, name: str, pending: Pending, error: str, action: str, took: float = 0):
        """Count a failed try of ``name`` and emit it, with when it is tried again."""
        pending.failures += 1
        pending.error = error
        pending.due = next_try(pending.failures, self.number, self._cap())
        wait = (pending.due - self.number) * self.options.interval
        detail = f"{error}; next try in pass {pending.due} (in about {wait:.{wait < 10:d}f}s)"
        self.emit(Event(name, pending.why, action, "failed", took, detail))

    def _cap(self) -> int:
        """Return ``--max-backoff`` in passes."""
        return int(self.options.max_backoff // self.options.interval)

    def _apply_due(
        self, listed: dict[str, Sighting], found: Inventory, busy_now: dict[str, str]
    ) -> dict[str, str | None]:
        """Apply, in one pyinfra run, to every pending pod whose try is due (but those this
        pass's check found busy: they stay pending); return each one's error (None: it
        succeeded)."""
        due = sorted(
            name
            for name, pending in self.pending.items()
            if pending.due <= self.number
            and name in listed
            and not listed[name].held
            and name not in busy_now
        )
        if not due:
            return {}

        def announce() -> None:  # once pyinfra runs
            for name in due:
                pending = self.pending[name]
                tried = f"try {pending.failures + 1}; {pending.error}" if pending.failures else None
                self.emit(Event(name, pending.why, "apply", "started", detail=tried))

        groups = {group for pod in found.pods for group in pod.groups}
        limits = [arg for name in due for arg in ("--limit", limit_pattern(name, groups))]
        command = [*_pyinfra(), "-y", "--json", *limits, INVENTORY, *self.options.deploys]
        started = time.monotonic()
        returncode, stdout, stderr = self._child(command, announce)
        took = time.monotonic() - started
        outcomes = apply_outcomes(due, returncode, stdout, stderr)
        for name in due:
            pending = self.pending[name]
            if outcomes[name] is None:
                del self.pending[name]
                self.emit(Event(name, pending.why, "apply", "ok", took))
            else:
                self._failed(name, pending, outcomes[name], "apply", took)
        return outcomes

    def _check(self) -> dict[str, dict[str, Any]] | None:
        """Run the drift check of the whole fleet; return its report's pods, or None (and
        an event saying why) when it wrote no report."""
        deploys = [arg for deploy in self.options.deploys for arg in ("--deploy", deploy)]
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="podstate-watch-") as tmp:
            path = Path(tmp) / "check.json"
            command = [sys.executable, "-m", "podstate", "check", "--json", str(path), *deploys]
            returncode, _, stderr = self._child(command)
            try:
                return json.loads(path.read_text())["pods"]
            except (OSError, ValueError, KeyError, TypeError):
                lines = [line for line in stderr.splitlines() if line.strip()]
                why = lines[-1] if lines else f"podstate check exited with status {returncode}"
        self.emit(Event(None, "check", "check", "failed", time.monotonic() - started, why))
        return None

    def _summary(
        self,
        found: Inventory,
        checked: bool,
        results: dict[str, str | None],
        listed: dict[str, Sighting],
        took: float,
    ) -> None:
        """Emit the pass's own line: what it listed and did, and who is waiting."""
        ok = sum(error is None for error in results.values())
        waiting = sorted(
            f"{name} (pass {p.due})" for name, p in self.pending.items() if p.due > self.number
        )
        held = sum(1 for s in listed.values() if s.held)
        parts = [f"{len(listed)} pods from the {found.source}"]
        if results:
            parts.append(f"applied to {len(results)}: {ok} ok, {len(results) - ok} failed")
        if held:
            parts.append(f"{held} held")
        if waiting:
            parts.append(f"waiting: {', '.join(waiting)}")
        detail = "; ".join(parts)
        self.emit(Event(None, "pass", "check" if checked else "list", "done", took, detail))

    # --- processes, output, signals ------------------------------------------------------

    def _child(
        self, command: list[str], started: Callable[[], None] | None = None
    ) -> tuple[int, str, str]:
        """Run ``command`` from the working directory, stdin closed, in a session of its
        own (a terminal's Ctrl-C is for the watch, which lets the child finish), calling
        ``started`` once it runs; return its status, stdout and stderr."""
        self.child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        try:
            if started:
                started()
            stdout, stderr = self.child.communicate()
            return self.child.returncode, stdout, stderr
        finally:
            self.child = None

    def emit(self, event: Event) -> None:
        """Write one event line to the output, at once."""
        self.out.write(event.line(_now(), self.number, self.options.json))
        self.out.flush()

    def _sleep(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the next pass; a signal ends the wait early."""
        deadline = time.monotonic() + seconds
        while not self.stopping and not self.woken and time.monotonic() < deadline:
            select.select([self._wake_read], [], [], max(0.0, deadline - time.monotonic()))
            try:
                os.read(self._wake_read, 512)
            except BlockingIOError:
                pass
        self.woken = False

    def _wake(self, signum: int, frame: object) -> None:  # handler signature
        self.woken = True
        self._poke()

    def _stop(self, signum: int, frame: object) -> None:
        """First signal: finish the child in flight, then exit 0. Second: stop at once."""
        if self.stopping is None:
            self.stopping = signum
            self._poke()
            busy = self.busy
            event = Event(
                None,
                signal.Signals(signum).name,
                "stop",
                "after this pass" if busy else "now",
                detail="the run in flight finishes; a second signal stops it at once"
                if busy
                else None,
            )
            # Not self.out: the signal may have come in the middle of a write to it.
            _write_raw(self.out, event.line(_now(), self.number, self.options.json))
            return
        child = self.child
        if child is not None:
            try:
                child.send_signal(signal.SIGTERM)  # pyinfra stops between two commands
            except ProcessLookupError:
                pass
        signals.exit_now(signum)

    def _poke(self) -> None:
        try:
            os.write(self._wake_write, b"x")
        except BlockingIOError:
            pass  # the pipe is full: the watch will wake anyway


def _write_raw(out: TextIO, text: str) -> None:
    """Write ``text`` to ``out``'s file descriptor, past its buffer (safe in a handler)."""
    try:
        os.write(out.fileno(), text.encode())
    except (OSError, ValueError, AttributeError):
        pass


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pyinfra() -> list[str]:
    """Return the command that runs the pyinfra CLI of this installation."""
    script = Path(sys.executable).parent / "pyinfra"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pyinfra"]


def run(options: Options) -> int:
    """Check the options and files, then watch; return the exit status."""
    if options.interval <= 0 or options.max_backoff <= 0 or options.check_every < 1:
        raise WatchError("--interval and --max-backoff must be above 0, --check-every at least 1")
    if not options.deploys:
        raise WatchError("no deploy files to apply (run from the repository root)")
    for path, what in [(INVENTORY, "inventory"), *((d, "deploy file") for d in options.deploys)]:
        if not os.path.isfile(path):
            raise WatchError(f"no {what} at {path} (run from the repository root)")
    return Watch(options).run()
