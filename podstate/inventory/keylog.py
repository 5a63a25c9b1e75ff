"""The host-key fingerprints a RunPod container's start printed, read from RunPod's log.

RunPod's start script prints, at every container start, ``SSH host keys:`` and then for each
key ``Key: /etc/ssh/ssh_host_<type>_key.pub`` and ``ssh-keygen -lf``'s line
(``256 SHA256:... root@... (ED25519)``); before that, ``<TYPE> key fingerprint:`` and the
same line for each key it generates. The v2 API serves the container's output over HTTPS
with the account's key (``GET /v2/pods/{id}/logs?source=container&since=<startedAt>``, as
Server-Sent Events), so those fingerprints say which key the pod's sshd serves before
podstate connects to it (``hostkeys.vouched``).

The stream stays open after its backfill. A read stops at the end of the key block, after
``IDLE_ENV`` seconds without a log line (comments and keep-alives are not lines), after
``TIMEOUT_ENV`` seconds in all, or at ``MAX_LINES`` lines or ``MAX_BYTES`` bytes; rate
limits are waited out within that time. Every pod's read runs at once (``read_all``).
Nothing of the stream is logged or kept but the fingerprints; a read that yields none says
why, for the reports.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import time
import urllib.error
import urllib.parse
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from podstate.inventory import api_http
from podstate.inventory.runpod_client import RunPodClient, retry_wait

IDLE_ENV = "PODSTATE_KEY_LOG_IDLE"  # seconds without a log line that end a read
TIMEOUT_ENV = "PODSTATE_KEY_LOG_TIMEOUT"  # seconds one pod's read may take in all
IDLE_S = 3.0
TIMEOUT_S = 10.0
MAX_LINES = 2000  # log lines read per pod at most
MAX_BYTES = 1 << 20  # bytes of stream read per pod at most
MAX_AT_ONCE = 128  # reads in flight at once

FINGERPRINT = re.compile(r"^SHA256:[A-Za-z0-9+/]{43}$")
_KEYGEN_LINE = re.compile(r"^\d+ (SHA256:[A-Za-z0-9+/]{43}) .*\([A-Z0-9-]+\)$")
_KEY_PATH = re.compile(r"^Key: /etc/ssh/ssh_host_[a-z0-9]+_key\.pub$")
_GENERATED = re.compile(r"^[A-Z0-9]+ key fingerprint:$")


@dataclass(frozen=True)
class KeyLog:
    """What a pod's log says of its host keys: the fingerprints, or why there are none."""

    fingerprints: tuple[str, ...]
    reason: str | None = None  # why no fingerprint was read (None when some were)


class KeyBlock:
    """The key lines of one container's log, fed line by line (``feed``).

    ``done`` once the ``SSH host keys:`` block has ended (a line that is neither ``Key:``
    nor a fingerprint after it): every key sshd serves is listed by then.
    """

    def __init__(self) -> None:
        self.fingerprints: list[str] = []
        self.done = False
        self._listing = False  # inside the SSH host keys: block
        self._expect = False  # the previous line announces a fingerprint line

    def feed(self, line: str) -> None:
        """Take one log line (its text, without the line break)."""
        line = line.strip()
        found = _KEYGEN_LINE.match(line)
        if self._expect and found:
            if found.group(1) not in self.fingerprints:
                self.fingerprints.append(found.group(1))
            self._expect = False
            return
        self._expect = False
        if line == "SSH host keys:":
            self._listing = True
        elif _KEY_PATH.match(line) and self._listing:
            self._expect = True
        elif _GENERATED.match(line):
            self._expect = True
        elif self._listing:
            self._listing, self.done = False, bool(self.fingerprints)


def fingerprints_in(lines: Iterable[str]) -> list[str]:
    """Return the fingerprints a start script printed in ``lines`` (pure: for the tests and
    for whoever checks a copied console log)."""
    block = KeyBlock()
    for line in lines:
        block.feed(line)
    return block.fingerprints


def limits() -> tuple[float, float]:
    """Return (idle, total) seconds of one read, from ``IDLE_ENV`` and ``TIMEOUT_ENV``."""
    return _seconds(IDLE_ENV, IDLE_S), _seconds(TIMEOUT_ENV, TIMEOUT_S)


def _seconds(name: str, default: float) -> float:
    """Return ``name``'s seconds from the environment (above 0, up to 600; ``0.5`` too),
    ``default`` when it is unset or empty; InventoryError, one line, for anything else."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,6})?", raw) and 0 < float(raw) <= 600:
        return float(raw)
    raise api_http.InventoryError(f"{name}={raw!r}: expected seconds above 0, up to 600")


def read_all(config: RunPodClient, pods: dict[str, str | None]) -> dict[str, KeyLog]:
    """Return each pod's ``KeyLog`` (``pods``: pod id -> its container's ``startedAt``),
    every read at once, so many pods cost the time of the slowest read."""
    if not pods:
        return {}
    idle, total = limits()
    with ThreadPoolExecutor(min(len(pods), MAX_AT_ONCE)) as pool:
        futures = {
            pod_id: pool.submit(read, config, pod_id, since, idle, total)
            for pod_id, since in pods.items()
        }
        return {pod_id: future.result() for pod_id, future in futures.items()}


def read(config: RunPodClient, pod_id: str, since: str | None, idle: float, total: float) -> KeyLog:
    """Return the fingerprints the start of the container started at ``since`` printed, as
    RunPod's log shows them; with none, why (the read never raises)."""
    if not since:
        return KeyLog((), "RunPod gives no startedAt for this pod, so no log of its start")
    query = urllib.parse.urlencode({"source": "container", "since": since})
    url = f"{config.base_url}/v2/pods/{urllib.parse.quote(pod_id, safe='')}/logs?{query}"
    deadline = time.monotonic() + total
    opener = api_http.opener(url)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return KeyLog((), f"RunPod's log gave no answer within {total:g} s")
        try:
            with opener.open(
                api_http.authorized(url, config.api(), "text/event-stream"), timeout=min(idle, left)
            ) as response:
                return _stream(response, deadline, idle)
        except urllib.error.HTTPError as e:
            e.close()
            if e.code == 429:
                wait = retry_wait(e.headers)
                if time.monotonic() + wait < deadline:
                    time.sleep(wait)
                    continue
                return KeyLog((), f"RunPod's log is rate-limited (429, retry after {wait:g} s)")
            return KeyLog((), f"RunPod's log answered {e.code} {e.reason}".rstrip())
        except (OSError, http.client.HTTPException, ValueError) as e:
            why = "no answer in time" if isinstance(e, TimeoutError) else type(e).__name__
            return KeyLog((), f"RunPod's log could not be read ({why})")


def _stream(response: http.client.HTTPResponse, deadline: float, idle: float) -> KeyLog:
    """Return the fingerprints of an event stream, read within the bounds (module doc)."""
    block = KeyBlock()
    lines = size = 0
    data: list[str] = []
    last = time.monotonic()
    why = None
    while not block.done:
        now = time.monotonic()
        if now - last > idle or now > deadline:
            why = f"RunPod's log sent no key block ({lines} line(s) read, then none for a while)"
            break
        try:
            raw = response.readline(64 << 10)
        except (TimeoutError, OSError, http.client.HTTPException):
            why = f"RunPod's log sent no key block ({lines} line(s) read, then none for a while)"
            break
        size += len(raw)
        if not raw or size > MAX_BYTES or lines >= MAX_LINES:
            why = f"RunPod's log has no key block for this container ({lines} line(s) read)"
            break
        field = raw.decode("utf-8", "replace").rstrip("\r\n")
        if field.startswith("data:"):
            data.append(field[5:].removeprefix(" "))
        elif not field and data:  # the end of an event
            line = _log_line("\n".join(data))
            data = []
            if line is not None:
                lines, last = lines + 1, time.monotonic()
                block.feed(line)
    if block.fingerprints:
        return KeyLog(tuple(block.fingerprints))
    return KeyLog((), why)


def _log_line(data: str) -> str | None:
    """Return the container log line of an event's data, None for anything else."""
    try:
        event = json.loads(data)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("source", "container") != "container":
        return None
    line = event.get("line")
    return line if isinstance(line, str) else None
