"""Notifications of ``podstate watch``: each event a person should know of, posted as JSON to
every ``--notify`` URL (and ``PODSTATE_NOTIFY``'s).

The events, from each pass's record (``podstate.watch.hooks.Pass``): a restart put back
(``restarted``, with the seconds from the container's start to its ready marker), a
violation that appeared or cleared (``violation``, ``violation_cleared``), a pod unreachable
since ``UNREACHABLE_AFTER`` passes and one reachable again (``unreachable``, ``reachable``),
an idle pod stopped (``idle_stopped``, with its price), an apply that failed
(``apply_failed``: the first of a row of failures). The body is
``schema/notify-event.schema.json``'s: structured fields, and the same line as ``text``
(Slack's) and ``content`` (Discord's), so a chat's webhook URL works as it is.

A notification never holds a pass up: the bodies go to a worker thread, which posts each one
with a ``timeout``, ``tries`` times at most with a growing wait between; a URL that still
fails is one line on stderr naming its host alone (a webhook's URL is its secret), and the
rest of that pass's events are not sent there. Before the watch exits, it waits for the
worker as long as one pass's deliveries may take, at most.
"""

from __future__ import annotations

import atexit
import collections
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from typing import Any, TextIO

from podstate.watch.hooks import Pass
from podstate.watch.idle import duration
from podstate.watch.idler import money
from podstate.watch.options import Options, WatchError

UNREACHABLE_AFTER = 3  # passes a pod is unreachable before it is told
TIMEOUT_S = 5.0  # each try's wait for a connection, and for each part of the answer
TRIES = 3
BACKOFF_S = 1.0  # the wait before the second try; doubled before each later one
QUEUED = 100  # passes' events waiting at most; more are dropped, and said so
TEXT_MAX = 1900  # characters of ``text``: Discord takes 2,000 at most


def start(options: Options) -> list[Notifier]:
    """Return the notifier ``options`` ask for (``--notify``), if any; WatchError, one
    line, for a URL that is not one."""
    return [Notifier(options.notify)] if options.notify else []


def check_url(url: str, where: str) -> None:
    """Raise WatchError, one line that does not show the URL, when ``url`` is not an
    http(s) URL with a host (``where`` says which one it is)."""
    try:
        parts = urllib.parse.urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError:
        ok = False
    if not ok:
        raise WatchError(f"{where}: expected an http:// or https:// URL with a host")


def host(url: str) -> str:
    """Return the host of ``url``: all a log line may say of a webhook."""
    return urllib.parse.urlsplit(url).hostname or "?"


class Notifier:
    """Turns each pass's record into events and posts them, in the background."""

    def __init__(
        self,
        urls: tuple[str, ...] | list[str],
        timeout: float = TIMEOUT_S,
        tries: int = TRIES,
        backoff: float = BACKOFF_S,
        log: TextIO | None = None,
        unreachable_after: int = UNREACHABLE_AFTER,
    ) -> None:
        for number, url in enumerate(urls, 1):
            check_url(url, f"--notify (URL {number} of {len(urls)})")
        self.urls = tuple(urls)
        self.timeout, self.tries, self.backoff = timeout, tries, backoff
        self.log = log
        self.unreachable_after = unreachable_after
        self.violations: dict[str, dict[str, str]] = {}  # each pod's, as last read
        self.told: set[str] = set()  # the pods told unreachable
        self.last = 0  # the last pass told of
        self._queue: collections.deque[list[dict[str, Any]]] = collections.deque()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        atexit.register(self.close)

    # --- what to tell -----------------------------------------------------------------

    def passed(self, seen: Pass) -> None:
        """Queue the events of the pass ``seen`` (none twice, a pass once) and return."""
        if seen.number <= self.last:
            return
        self.last = seen.number
        bodies = list({json.dumps(b, sort_keys=True): b for b in self.events(seen)}.values())
        if bodies:
            self._put(bodies)

    def events(self, seen: Pass) -> list[dict[str, Any]]:
        """Return the bodies of the events of ``seen`` (violations, applies, stops, then
        reachability), and remember what the next pass is compared with."""
        out: list[dict[str, Any]] = []

        def add(kind: str, pod: str, line: str, detail: str | None = None, **more: Any) -> None:
            out.append(body(kind, pod, seen, line, detail, **more))

        for name in sorted(set(self.violations) - set(seen.pods)):
            del self.violations[name]  # gone from the listing: forgotten
        for name, view in sorted(seen.pods.items()):
            if view.violations is None:
                continue
            before, now = self.violations.get(name, {}), view.violations
            self.violations[name] = now
            new = {k: v for k, v in now.items() if k not in before}
            cleared = sorted(k for k in before if k not in now)
            if new:
                said = "; ".join(f"{k}: {v}" for k, v in new.items())
                add("violation", name, f"{name}: {said}", said, violations=_listed(new))
            if cleared:
                gone = {k: before[k] for k in cleared}
                line = f"{name}: cleared: {', '.join(cleared)}"
                add("violation_cleared", name, line, ", ".join(cleared), violations=_listed(gone))
        for a in seen.applied:
            if a.error is None and a.why == "restarted":
                ready = (
                    "start time unknown"
                    if a.ready_after is None
                    else (f"ready {duration(a.ready_after)} after its container started")
                )
                line = f"{a.pod} restarted and was put back: {ready} (apply {a.seconds:.1f} s)"
                add("restarted", a.pod, line, ready, seconds=a.ready_after, apply_seconds=a.seconds)
            elif a.error is not None and a.first_failure:
                line = f"{a.pod}: apply failed ({a.why}): {a.error}"
                add("apply_failed", a.pod, line, a.error, why=a.why, apply_seconds=a.seconds)
        for pod, price in seen.stopped:
            saves = f"saves {money(price)}/h" if price is not None else "its price is unknown"
            line = f"{pod} was idle and is stopped: {saves}"
            add("idle_stopped", pod, line, cost_per_hour=price)
        unreachable = seen.unreachable or {}
        for pod, since in sorted(unreachable.items()):
            passes = seen.number - since + 1
            if passes >= self.unreachable_after and pod not in self.told:
                self.told.add(pod)
                line = f"{pod} has been unreachable for {passes} passes (since pass {since})"
                add("unreachable", pod, line, passes=passes)
        for pod in sorted(self.told - set(unreachable)):
            self.told.discard(pod)
            if pod in seen.pods:
                add("reachable", pod, f"{pod} is reachable again")
        return out

    # --- delivery ---------------------------------------------------------------------

    def _put(self, bodies: list[dict[str, Any]]) -> None:
        """Hand a pass's bodies to the worker (started when none runs)."""
        with self._lock:
            if len(self._queue) >= QUEUED:
                self._say(
                    f"{len(bodies)} events of pass {bodies[0]['pass']} dropped: "
                    f"{QUEUED} passes' events are still being sent"
                )
                return
            self._queue.append(bodies)
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="notify", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        """Post the queued bodies, a pass's at a time, until none is left."""
        while True:
            with self._lock:
                if not self._queue:
                    self._worker = None
                    return
                bodies = self._queue.popleft()
            for url in self.urls:
                for done, each in enumerate(bodies):
                    why = self.post(url, each)
                    if why is not None:
                        left = len(bodies) - done - 1
                        rest = f"; {left} more events of pass {each['pass']} not sent there"
                        self._say(
                            f"a notification to {host(url)} failed: {why}" + (rest if left else "")
                        )
                        break

    def post(self, url: str, payload: dict[str, Any]) -> str | None:
        """Post ``payload`` to ``url``, ``tries`` times at most; return None once it is
        taken (a 2xx answer), else why not, in words that never show the URL."""
        data = json.dumps(payload).encode()
        why = "not tried"
        for attempt in range(self.tries):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(
                url,
                data=data,
                method="POST",
                headers={"Content-Type": "application/json", "User-Agent": "podstate-watch"},
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    answer.read(65536)
                return None
            except urllib.error.HTTPError as e:
                e.close()
                why = f"HTTP {e.code}"
                if 400 <= e.code < 500 and e.code not in (408, 429):
                    return why  # the URL is wrong, or revoked: no try will do better
            except (OSError, ValueError) as e:  # URLError, a timeout, a reset connection
                reason = getattr(e, "reason", e)
                if isinstance(reason, TimeoutError):
                    why = f"no answer within {self.timeout:g} s"
                else:
                    why = getattr(reason, "strerror", None) or type(reason).__name__
        return f"{why} ({self.tries} tries)"

    def close(self, timeout: float | None = None) -> None:
        """Wait for the events still queued, up to ``timeout`` seconds (default: as long
        as one pass's deliveries may take: every try of one event to each URL)."""
        if timeout is None:  # a try may wait for the connection, then for the answer
            waits = self.backoff * (2 ** (self.tries - 1) - 1)
            timeout = (self.tries * 2 * self.timeout + waits) * len(self.urls)
        deadline = time.monotonic() + timeout
        while (worker := self._worker) is not None and time.monotonic() < deadline:
            worker.join(max(0.0, deadline - time.monotonic()))

    def _say(self, line: str) -> None:
        log = self.log or sys.stderr
        log.write(f"podstate: {line}\n")
        log.flush()


def body(
    kind: str, pod: str, seen: Pass, line: str, detail: str | None = None, **more: Any
) -> dict[str, Any]:
    """Return the JSON body of one event (``schema/notify-event.schema.json``): its kind,
    pod, pass and time, its detail, its fields, and ``line`` as ``text`` and ``content``."""
    text = f"podstate watch: {line}"
    text = text.replace("<", "\u2039").replace(">", "\u203a")  # no Slack control sequence
    if len(text) > TEXT_MAX:
        text = text[: TEXT_MAX - 1] + "\u2026"
    moment = datetime.fromtimestamp(seen.time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "event": kind,
        "pod": pod,
        "pass": seen.number,
        "time": moment,
        "detail": detail,
        "text": text,
        "content": text,
        "allowed_mentions": {"parse": []},  # Discord: the text pings no one
        **more,
    }


def _listed(found: dict[str, str]) -> list[dict[str, str]]:
    return [{"id": k, "message": v} for k, v in found.items()]
