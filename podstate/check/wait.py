"""``podstate wait``: until every selected pod is ready for the current desired state.

A pod is ready when its ready marker (``podstate.roles.ready``), which an apply that
succeeded left on its container disk, is for the desired state as it is now, and the pod
has no violation. Each pass is a drift check of the pods not ready yet.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from podstate import settings
from podstate.check import runner
from podstate.check.reports import restart_line
from podstate.check.result import PodResult
from podstate.progress import Progress


def why_not(result: PodResult) -> str:
    """Return, in words, why a pod is not ready."""
    if result.status in ("unreachable", "error"):
        return f"{result.status}: {result.error}"
    if result.violations:
        return "violation: " + "; ".join(v["message"] for v in result.violations)
    if result.restarted:
        return f"restarted ({restart_line(result)}); waiting for an apply"
    if not result.ready:
        return "no apply of this desired state has succeeded on it yet"
    return "ready"


def is_ready(result: PodResult) -> bool:
    """Return whether the pod is ready for the desired state the check planned."""
    return result.ready and result.status not in ("violation", "unreachable", "error")


def run(
    inventory: str,
    deploys: list[str],
    limit: list[str],
    timeout: int,
    interval: int = 5,
    out: TextIO = sys.stdout,
    strict_host_keys: bool | None = None,
    progress: Progress | None = None,
) -> int:
    """Check the pods every ``interval`` seconds until all are ready (return 0) or
    ``timeout`` seconds have passed (return 1, naming each pod still missing and why).
    Each check connects as ``podstate check`` does (``PODSTATE_CONNECT_TIMEOUT``,
    ``strict_host_keys``); ``progress`` is told each pod's stage, and cleared before a line
    is printed."""
    deadline = time.monotonic() + timeout
    ready: set[str] = set()
    waiting: dict[str, PodResult] = {}
    total: int | None = None
    display = progress or Progress("wait", sys.stderr, tty=False, done="ready")

    def told(name: str, stage: str) -> None:  # checked is not ready: said below
        if stage != "checked":
            display.pod(name, stage)

    while True:
        results = runner.run(
            inventory,
            deploys,
            sorted(waiting) or limit,  # those not ready
            timeout=settings.CONNECT_TIMEOUT,
            strict_host_keys=strict_host_keys,
            progress=told,
        )
        total = len(results) if total is None else total
        now_ready = {name for name, r in results.items() if is_ready(r)}
        waiting = {name: r for name, r in results.items() if name not in now_ready}
        for name in results:
            display.pod(name, "ready" if name in now_ready else "not ready")
        display.clear()
        if now_ready or not total:
            ready |= now_ready
            print(f"{len(ready)} of {total} ready", file=out, flush=True)
        if not waiting:
            return 0
        if time.monotonic() + interval > deadline:
            print(f"{len(waiting)} of {total} not ready after {timeout} s:", file=out)
            for name, result in sorted(waiting.items()):
                print(f"  {name}: {why_not(result)}", file=out)
            return 1
        time.sleep(interval)
