"""``podstate watch``: a loop that puts pods back, for an always-on machine or a cron job.

Every ``--interval`` seconds a pass lists the pods as the inventory does (one ``GET
/v2/pods``, handed to the runs it starts: ``podstate.watch.children``; or the pods file read
again; no host key recorded), and applies, in one pyinfra run, to the pods that are new,
restarted or moved (``podstate.watch.decisions``). Every ``--check-every`` passes, the
first included, it runs the drift check of the whole fleet instead and applies to the pods
found drifted or restarted.
A pod that fails is tried again with exponential backoff, counted in passes; a listing the
API refused for now puts the next pass off, exponentially, and as long as its
``Retry-After`` at least; a held pod (``watch: {hold: true}`` in its vars, or
``--exclude``) is checked and logged, never changed.

The check and the apply are the commands a user runs, as child processes: ``podstate check
--json`` and ``pyinfra -y --json inventories/pods.py DEPLOY... --limit POD...``. They take
the pod lock as any run does, so a watch and a hand-run apply never work on one pod at once.
With ``--shard K/N``, a pass's check, apply and state file are of shard K's pods alone.

Signals: the first SIGTERM or SIGINT lets the child in flight finish (it runs in a session
of its own, so a terminal's Ctrl-C does not reach it), then the watch exits 0; a second one
stops it and the child at once. SIGHUP starts the next pass now.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, cast

from podstate import signals
from podstate.desired.errors import SpecError
from podstate.inventory.api_http import ApiUnavailable
from podstate.inventory.fleet import Inventory, load_inventory
from podstate.watch import hooks, metrics, notify, state
from podstate.watch.children import handed, pyinfra
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
    listing_delay,
    next_try,
    sighting,
    summary,
    violation_text,
)
from podstate.watch.idler import Idler
from podstate.watch.options import Options, validate

INVENTORY = "inventories/pods.py"
_RESET = ("new", "restarted", "moved")  # the pod itself changed: a fresh start, no backoff


class Watch:
    """The loop's state: what earlier passes saw, the pods waiting for an apply, the child
    process in flight, the signals received. Its only ties to time are ``sleep`` (the wait
    between passes), ``clock`` (``time.monotonic``) and ``wall`` (the time idle periods are
    kept in), which unit tests give."""

    def __init__(
        self,
        options: Options,
        out: TextIO = sys.stdout,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.options = options
        self.out = out
        self.sleep = sleep or self._sleep
        self.clock = clock
        path = Path(options.state) if options.state else state.default_path(options.shard)
        gap = max(options.max_backoff, 3 * options.interval) + options.interval
        self.hooks = hooks.Hooks([*notify.start(options), *metrics.start(options)])
        self.idler = Idler(path, wall, gap, self.emit, options.dry_run)  # idle pods
        self.delay = options.interval  # from this pass's start to the next one's
        self.api_failures = 0  # listings in a row the API failed
        self.next_check = 1  # the first pass that may run the drift check
        self.pass_dir: Path | None = None  # this pass's private files (``children.handed``)
        self.child_env: dict[str, str] | None = None  # the environment of its runs
        self.known: dict[str, Sighting] = {}  # every pod's last sighting
        self.present: set[str] = set()  # the pods the last pass listed
        self.pending: dict[str, Pending] = {}
        self.number = 0  # the pass running, from 1
        self.child: subprocess.Popen[str] | None = None
        self.stopping: int | None = None  # the first stop signal received
        self.woken = False
        self.busy = False  # in a pass: a stop waits for its end
        self._wake_read, self._wake_write = os.pipe()
        for fd in (self._wake_read, self._wake_write):
            os.set_blocking(fd, False)

    # --- the loop ------------------------------------------------------------------------

    def run(self) -> int:
        """Run passes until a signal (exit 0), the ``--passes`` asked for (0), or, with
        ``--once``, one pass (the fleet's status after it: 0, 2 drift left, 1 worse). The
        first listing's SpecError (an invalid desired state, an API that refuses the
        key) propagates: the watch stops before its first pass, with one line; a rate-limited
        or unavailable API does not stop it. Its signal handlers go when it returns."""
        handlers = {n: signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._stop)
        signal.signal(signal.SIGHUP, self._wake)
        # Every signal wakes ``_sleep`` through the pipe, written as it arrives, whichever
        # thread the kernel hands it to (Python runs the handler in the main thread only,
        # once that thread wakes); a full pipe wakes it as well.
        old_wakeup = signal.set_wakeup_fd(self._wake_write, warn_on_full_buffer=False)
        try:
            while True:
                started = self.clock()
                self.number += 1
                self.busy = True
                status = self.one_pass()
                if self.options.once:
                    return status
                if self.stopping or self.number == self.options.passes:
                    return 0
                self.sleep(started + self.delay - self.clock())
                if self.stopping:
                    return 0
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)

    def one_pass(self) -> int:
        """Run one pass; return the fleet's status after it (``watch_plan.exit_code``)."""
        started = self.clock()
        self.delay = self.options.interval
        try:
            found = load_inventory(record_host_keys=False)
        except ApiUnavailable as e:  # not the desired state's fault: ask again, later
            self.api_failures += 1
            o = self.options
            self.delay = listing_delay(self.api_failures, o.interval, o.max_backoff, e.retry_after)
            detail = f"{e}; next listing in {self.delay:.0f}s"
            self._end(Event(None, e.kind, "none", "nothing applied", detail=detail))
            return 1
        except SpecError as e:
            if self.number == 1:
                raise
            self._end(Event(None, "invalid", "none", "nothing applied", detail=str(e)))
            return 1
        self.api_failures = 0
        with handed(found.listing) as (self.pass_dir, self.child_env):
            status, line = self._act(found)
        self._end(replace(line, seconds=self.clock() - started))  # its files gone: it ends
        return status

    def _act(self, found: Inventory) -> tuple[int, Event]:
        """Run the rest of a pass on what it listed: check, note, apply; return the fleet's
        status after it, and the pass's own line."""
        pods = [pod for pod in found.pods if self.options.watches(pod.name)]  # --shard's
        listed = {pod.name: sighting(pod, self.options.exclude) for pod in pods}
        reasons = changed(self.known, listed)
        failed: dict[str, str] = {}
        statuses: dict[str, str] = {}
        busy_now: dict[str, str] = {}
        checked = self.number >= self.next_check  # put off by a pass that could not list
        if checked:
            self.next_check = self.number + self.options.check_every
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
        self.idler.note(pods, listed, report, checked)
        for name in self.present - listed.keys():
            self.pending.pop(name, None)
            self.emit(Event(name, "gone", "none", "ok", detail=f"no longer in the {found.source}"))
        self._note(listed, reasons, failed, statuses)
        results = self._apply_due(listed, found, busy_now) if not self.stopping else {}
        for name, error in results.items():
            statuses[name] = "error" if error else "ok"
        self.known.update(listed)
        self.present = set(listed)
        self.hooks.passed(self, found.pods, report, statuses)
        detail = summary(found.source, listed, results, self.pending, self.number)
        detail = f"shard {self.options.shard}: {detail}" if self.options.shard else detail
        line = Event(None, "pass", "check" if checked else "list", "done", 0, detail)
        if checked and report is None:
            return 1, line  # no report: the fleet's state is unknown
        return exit_code(statuses.values()), line

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

    def _failed(
        self, name: str, pending: Pending, error: str, action: str, took: float = 0
    ) -> None:
        """Count a failed try of ``name`` and emit it, with when it is tried again."""
        pending.failures += 1
        pending.error = error
        pending.due = next_try(pending.failures, self.number, self._cap())
        wait = (pending.due - self.number) * self.options.interval
        later = f"; next try in pass {pending.due} (in about {wait:.{wait < 10:d}f}s)"
        detail = error if self.options.once else error + later  # --once: no next pass
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
        command = [*pyinfra(), "-y", "--json", *limits, INVENTORY, *self.options.deploys]
        started = self.clock()
        returncode, stdout, stderr = self._child(command, announce)
        took = self.clock() - started
        outcomes = apply_outcomes(due, returncode, stdout, stderr)
        for name in due:
            pending = self.pending[name]
            outcome = outcomes[name]
            if outcome is None:
                del self.pending[name]
                self.emit(Event(name, pending.why, "apply", "ok", took))
            else:
                self._failed(name, pending, outcome, "apply", took)
        return outcomes

    def _check(self) -> dict[str, dict[str, Any]] | None:
        """Run the drift check of the whole fleet (or shard); return its report's pods, or
        None (and an event saying why) when it wrote no report."""
        deploys = [arg for deploy in self.options.deploys for arg in ("--deploy", deploy)]
        started = self.clock()
        assert self.pass_dir is not None  # within _handed
        path = self.pass_dir / "check.json"
        command = [sys.executable, "-m", "podstate", "check", "--json", str(path), *deploys]
        command += ["--shard", str(self.options.shard)] if self.options.shard else []
        returncode, _, stderr = self._child(command)
        try:
            return cast(dict[str, dict[str, Any]], json.loads(path.read_text())["pods"])
        except (OSError, ValueError, KeyError, TypeError):
            lines = [line for line in stderr.splitlines() if line.strip()]
            why = lines[-1] if lines else f"podstate check exited with status {returncode}"
        self.emit(Event(None, "check", "check", "failed", self.clock() - started, why))
        return None

    # --- processes, output, signals ------------------------------------------------------

    def _child(
        self, command: list[str], started: Callable[[], None] | None = None
    ) -> tuple[int, str, str]:
        """Run ``command`` from the working directory, stdin closed, in a session of its
        own (a terminal's Ctrl-C is for the watch, which lets the child finish), calling
        ``started`` once it runs; return its status, stdout and stderr. Its environment is
        the watch's, with this pass's listing (``children.handed``)."""
        self.child = subprocess.Popen(
            command,
            env=self.child_env,
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

    def _end(self, event: Event) -> None:
        """Emit the pass's own line: the pass is over, so a signal from now on stops the
        watch at once (what a reader of that line may send next)."""
        self.busy = False
        self.emit(event)

    def emit(self, event: Event) -> None:
        """Write one event line to the output, at once."""
        self.out.write(event.line(_now(), self.number, self.options.json))
        self.out.flush()
        self.hooks.event(event)

    def _sleep(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the next pass; a signal ends the wait early."""
        deadline = time.monotonic() + seconds
        while not self.stopping and not self.woken and time.monotonic() < deadline:
            select.select([self._wake_read], [], [], max(0.0, deadline - time.monotonic()))
            with contextlib.suppress(BlockingIOError):  # nothing to read: a timeout
                os.read(self._wake_read, 512)
        self.woken = False

    def _wake(self, signum: int, frame: object) -> None:  # handler signature
        self.woken = True

    def _stop(self, signum: int, frame: object) -> None:
        """First signal: finish the child in flight, then exit 0. Second: stop at once."""
        if self.stopping is None:
            self.stopping = signum
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
            signals.write_raw(self.out, event.line(_now(), self.number, self.options.json))
            return
        child = self.child
        if child is not None:
            try:
                child.send_signal(signal.SIGTERM)  # pyinfra stops between two commands
            except ProcessLookupError:
                pass
        if self.pass_dir is not None:  # exit_now cleans nothing up: the listing goes now
            shutil.rmtree(self.pass_dir, ignore_errors=True)
        signals.exit_now(signum)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(options: Options) -> int:
    """Check the options and files, then watch; return the exit status."""
    validate(options, INVENTORY)
    return Watch(options).run()
