"""``podstate uninstall`` on one pod: everything the records of what podstate made name goes
(roles/removal.py decides each), the boot hook and its stub too, then the records and
podstate's own files. It reads no desired state. podstate.pod.uninstall_deploy runs it.
"""

from __future__ import annotations

import posixpath

from pyinfra import host

from podstate.facts import made, record_id
from podstate.facts.marker import read
from podstate.facts.probe import Probe
from podstate.facts.request import Request
from podstate.operations import removal as ops
from podstate.operations.boot import Layout
from podstate.paths import (
    BOOT_FLAG,
    GIT_KNOWN_HOSTS,
    GPU_CACHE,
    ID_CACHE,
    IDLE_RECORD,
    MADE,
    READY_MARKER,
    SAVED,
)
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.roles.removal import undo, usable
from podstate.run import findings
from podstate.run.role import role


def reads(volume: str) -> Request:
    """Return what ``podstate uninstall`` reads: the records (the volume's at ``volume``,
    for the pod's id), what they name, and the volume's applied record (roles/ready.py)."""
    where = Layout(volume)
    return Request(paths=(volume,), files=(where.record,), made=made.at(volume))


@role("Uninstall")
def apply(
    probe: Probe,
    volume: str,
    packages: bool = False,
    keep_venv: bool = False,
    discard_scratch: bool = False,
) -> None:
    """Take away everything the records name (the boot hook and its stub too), then the
    records and podstate's own files and directories: the ready marker, the hook's status,
    the applied record on the volume where it names this pod. A pod without a record has
    nothing taken away: podstate never guesses what it made. A container disk's record that
    another pod's container disk came with (``record_id.copied``) goes, and what it names
    stays: it is not this pod's. The apt packages podstate
    installed go only with ``packages``, else they are named as left in place; with
    ``keep_venv`` the venv and its snapshots stay, named; a tmpfs that holds files goes only
    with ``discard_scratch``. What stays because it is in use (a venv a process runs from, a
    tmpfs one uses or that holds files: a violation) keeps the records and podstate's own
    files, so the next uninstall finds and finishes it."""
    found = probe.made_found()
    if not usable(probe):
        return
    old = made.previous(found)
    records = [r for r in found.records.values() if r.state == "file"]
    if not records:
        host.noop("no record of what podstate made on this pod: nothing to remove")
        return
    kept, paths = False, record_id.record_paths(found.pod_id, volume)
    mounted = {m.target for m in probe.mounts}  # what stays mounted: what is, but what goes
    for path, entry in sorted(old.items(), reverse=True):  # what is in a directory first
        with pyinfra_plan.keyed(host, path):
            remains = undo(
                entry,
                probe,
                uninstall=True,
                packages=packages,
                keep_venv=keep_venv,
                records=paths,
                discard_scratch=discard_scratch,
                volume=volume,
                staying=mounted,
            )
        kept |= remains == entry
    if kept:
        return
    left = findings.of(host).left.values()
    where = Layout(volume)
    mine = [MADE, READY_MARKER, BOOT_FLAG, GIT_KNOWN_HOSTS, GPU_CACHE, ID_CACHE, IDLE_RECORD]
    applied = read(probe.files.get(where.record))
    if applied is not None and applied.get("pod") == host.name:
        mine.append(where.record)
    on_volume = found.records.get("volume")
    if on_volume is not None and on_volume.state == "file" and found.pod_id is not None:
        mine.append(record_id.volume_record(volume, found.pod_id))
    base = posixpath.join(volume, ".podstate")
    ops.remove_paths(
        name="Remove podstate's records and own files",
        paths=mine,
        directories=[SAVED, posixpath.dirname(MADE)]
        + [posixpath.join(base, d) for d in ("bin", "made", "")],
        what="would remove: the records of what podstate made, its ready marker and status"
        + ("; would leave in place: " + ", ".join(left) if left else "")
        + (f"; {record_id.copied_words(found)}" if record_id.copied(found) else ""),
        trees=[posixpath.join(posixpath.dirname(MADE), ".boot")],
    )
