"""The restart benchmark's watch, restarts and ready times: ``podstate watch --json`` and its
events, pods restarted, and each pod's own word on when it was ready again.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.common.steps import BIN, ROOT, BenchError
from podstate.sandbox import container, ssh
from podstate.sandbox.state import SandboxError

POLL_S = 0.2  # how often the pod asks podstate-ready
READY_TIMEOUT_S = 300  # a pod not ready by then is reported as not ready, never as a time
# On the pod: wait for podstate-ready, then print the pod's clock (this machine's).
WAIT_READY = (
    f"until /usr/local/bin/podstate-ready 2>/dev/null; do sleep {POLL_S}; done; date +%s.%N"
)


class Watching:
    """``podstate watch --json`` at its defaults; every event with the time it was read."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.stderr = log.open("w")
        self.process = subprocess.Popen(
            [str(BIN / "podstate"), "watch", "--json"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=self.stderr, text=True, start_new_session=True,
        )  # fmt: skip
        self.events: list[dict[str, Any]] = []
        self._lines: queue.Queue[tuple[float, str] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout or []:
            self._lines.put((time.time(), line))
        self._lines.put(None)

    def until(self, wanted, timeout: float = READY_TIMEOUT_S) -> dict[str, Any]:
        """Return the next event ``wanted`` accepts (``read_at`` added: this machine's time
        when it came), keeping every event; BenchError when the watch ends or goes quiet."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise BenchError(f"watch: no awaited event within {timeout:.0f} s") from None
            if item is None:
                raise BenchError(f"watch ended with status {self.process.wait()}")
            event = json.loads(item[1]) | {"read_at": item[0]}
            self.events.append(event)
            if wanted(event):
                return event

    def end_of_pass(self, number: int | None = None) -> dict[str, Any]:
        """Return the fleet's line that ends pass ``number``, read already or not (None:
        the next one not read yet)."""

        def wanted(e: dict[str, Any]) -> bool:
            return e["pod"] is None and e["seen"] == "pass" and number in (None, e["pass"])

        if number is not None:
            for event in self.events:
                if wanted(event):
                    return event
        return self.until(wanted)

    def stop(self) -> int:
        """SIGTERM the watch (it finishes an apply in flight); return its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
        self.stderr.close()
        return status


def pass_start(end: dict[str, Any]) -> float:
    """Return when a pass began (its listing), from the line that ends it."""
    return end["read_at"] - end["seconds"]


def restart(names: list[str]) -> dict[str, float]:
    """Restart the pods one after the other (a few tenths of a second each); return when
    each one's SSH was up again.

    Not from threads at once: a pod's stop sweeps its old namespaces for stragglers, and
    Linux gives their freed numbers to the next namespaces made, another pod's new ones.
    """
    up: dict[str, float] = {}
    for name in names:
        try:
            container.restart(name)
        except SandboxError as error:
            raise BenchError(f"restart: {error}") from None
        up[name] = time.time()
    return up


def watch_ready(name: str) -> subprocess.Popen:
    """Start waiting on pod ``name`` for ``podstate-ready`` (direct SSH, no proxy: the
    pod's own answer, not the link's); its stdout is the pod's time when it was ready."""
    return subprocess.Popen(
        [*ssh.ssh_command(name), WAIT_READY],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def ready_at(process: subprocess.Popen, deadline: float) -> float | None:
    """Return the pod's time when it was ready; None when it was not by ``deadline``."""
    try:
        out, _ = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None
    try:
        return float(out.strip().splitlines()[-1]) if process.returncode == 0 else None
    except (ValueError, IndexError):
        return None
