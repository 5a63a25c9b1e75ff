"""Ready: the pod says, on its container disk, that an apply of this desired state succeeded.

An apply that succeeds on a pod (every step done, no unwaived violation) ends by writing
``MARKER`` on the container disk: the applied state's digest, the time and the container
start it was written in (``podstate.facts.start``). On RunPod a restart wipes the container
disk and the marker with it; on Vast a stop and start keeps them, and a marker from another
container start is not ready: the pod is *restarted*, with what the new start left behind.
The apply also writes a record on the volume (``<boot.volume>/.podstate/applied``), which a
restart keeps: which pod podstate applied to, and when; only where a volume is mounted,
since a directory on the container disk vanishes with the marker. A pod whose volume has
its own record but whose container disk has no marker has been re-created since podstate
applied to it: the check names it *restarted*. ``podstate-ready`` (on PATH, and on the
volume for a job that starts before podstate is back) lets a job wait for the marker; it
is installed on every pod podstate reaches, violations or not, so that a job waits rather
than fails.
"""

from __future__ import annotations

import json
import time
from datetime import date
from typing import Any

from pyinfra import host

from podstate.desired.state import State
from podstate.facts.made import sums
from podstate.facts.marker import applies_nothing, digest, read
from podstate.facts.probe import Probe
from podstate.facts.record import FileEntry
from podstate.facts.request import Request
from podstate.paths import READY_COMMAND, READY_MARKER
from podstate.roles import boot
from podstate.run import bookkeeping, findings
from podstate.run.role import role
from podstate.shell import script_file

MARKER, COMMAND = READY_MARKER, READY_COMMAND
READY_SH = script_file("podstate-ready.sh")


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: the marker, the record and the command
    (on the container disk and on the volume), and the volume."""
    where = boot.volume(wanted)
    return Request(
        paths=(where.volume,), files=(MARKER, where.record, COMMAND, where.ready_command)
    )


def restart(
    probe: Probe,
    record_path: str,
    pod: str,
    started_at: str | None,
    wanted: State | None = None,
) -> dict[str, Any] | None:
    """Return how this pod restarted since podstate last applied to it, or None: no restart,
    or never applied to (a volume whose record, at ``record_path``, names another pod says
    nothing about this one).

    Two ways: the container disk was wiped (RunPod: no marker, while the volume's record
    names this pod), or it was kept but the container started again (Vast: a marker from
    another container start, ``stale``). Either gives ``applied_at`` and ``since``
    (RunPod's ``startedAt`` when it is known); the second also what a new start left
    behind (``gone``: the processes, ``/dev/shm``'s contents, the desired scratch)."""
    marker = read(probe.files.get(MARKER))
    if marker is not None and stale(marker, probe):
        scratch = [f"scratch {path}" for path in (wanted.scratch_paths if wanted else ())]
        gone = ["processes", "/dev/shm contents", *scratch]
        return {"applied_at": marker.get("applied_at"), "since": started_at, "gone": gone}
    record = read(probe.files.get(record_path))
    if record is None or record.get("pod") != pod or marker:
        return None
    return {"applied_at": record.get("applied_at"), "since": started_at}


def stale(marker: dict[str, Any], probe: Probe) -> bool:
    """Return whether ``marker`` is from another container start than the one the probe
    read (``container_start``); a marker that names no start (written before podstate
    recorded it) is taken as this start's, one whose start cannot be compared is not."""
    return "container" in marker and marker["container"] != probe.container_start


def _failing(wanted: State) -> bool:
    found = findings.of(host)
    return bool(findings.waive(found.violations, wanted.waivers or (), date.today()).failing)


@role("Ready", reads)
def command(wanted: State, probe: Probe) -> None:
    """Name a restart; install podstate-ready, violations or not (only the marker waits for
    an apply without one)."""
    found, where = findings.of(host), boot.volume(wanted)
    found.restarted = restart(probe, where.record, host.name, host.data.get("started_at"), wanted)
    marker = read(probe.files.get(MARKER)) or {}
    found.ready = marker.get("digest") == digest(wanted) and not stale(marker, probe)
    if applies_nothing(wanted):  # nothing to be ready for (a pod after podstate uninstall)
        found.ready = True
        return
    paths = [COMMAND] + ([where.ready_command] if boot.has_volume(probe, where) else [])
    for path in paths:
        bookkeeping.owned_file(f"Command {path}", path, READY_SH, probe, "755")
        findings.made(FileEntry(path, sums(READY_SH)))
    findings.restorable(COMMAND, READY_SH, "755")


@role("Ready", reads)
def marker(wanted: State, probe: Probe) -> None:
    """Mark the pod ready and record the apply on the volume, unless a violation stands or
    the marker is there already."""
    found = findings.of(host)
    if _failing(wanted) or (found.ready and not found.restarted) or applies_nothing(wanted):
        return
    wanted_digest = digest(wanted)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    fields = {"digest": wanted_digest, "applied_at": now, "container": probe.container_start}
    marker = json.dumps(fields) + "\n"
    record = json.dumps({"pod": host.name, "digest": wanted_digest, "applied_at": now}) + "\n"
    where = boot.volume(wanted)
    bookkeeping.mark_ready(
        name="Ready marker",
        marker=(MARKER, marker),
        record=(where.record, record) if boot.has_volume(probe, where) else None,
    )
