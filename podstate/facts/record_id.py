"""Which pod a record of what podstate made is for, and where its records are: the pod's id
(its provider's identity, else the one the container disk's record names, else one podstate
makes), the volume record's name for it, and whether podstate may act on the records the
probe read (podstate.facts.made).

The provider's identity wins: a container disk copied from a configured pod (an image baked
with ``docker commit``, a Vast template made from an instance) carries that pod's record,
and its clones would otherwise take that pod's id, and share its record on the volume. Where
a container has no provider's identity, the id podstate made is copied with the disk, and
nothing podstate reads tells a copy from the pod it was copied from (docs/uninstall.md)."""

from __future__ import annotations

import posixpath
import re
import uuid

from podstate.facts.record import Made
from podstate.paths import MADE

# A pod id that names a volume record: a letter or digit, then letters, digits, ".", "_",
# "-" and "/" (Vast's identity joins two values with it), at most MAX_ID of them.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
MAX_ID = 128


def record_name(pod_id: str) -> str | None:
    """Return the file name of the volume's record for the pod ``pod_id``: the id, each "/"
    in it a "+" (so a RunPod id is the name as it is, and two ids never share a name); None
    for an id that makes no safe name (``_ID``), which then names no volume record. The
    probe's ``name_line`` is the same in sh."""
    if len(pod_id) > MAX_ID or not _ID.fullmatch(pod_id):
        return None
    return pod_id.replace("/", "+")


def name_line() -> str:
    """Return sh that sets ``made_name`` to ``record_name`` of the id in ``i`` (empty: it
    names none)."""
    return (
        "made_name=; case $i in [A-Za-z0-9]*) case $i in *[!A-Za-z0-9._/-]*) ;; *)"
        f' [ "${{#i}}" -gt {MAX_ID} ] || made_name=$i ;; esac ;; esac; while :; do'
        " case $made_name in */*) made_name=${made_name%%/*}+${made_name#*/} ;;"
        " *) break ;; esac; done"
    )


def new_id() -> str:
    """Return a new pod id, for a pod whose container has no identity of its provider that
    names a record (an image without its variables): written into the container disk's
    record, it binds the records to this container from then on."""
    return "podstate-" + uuid.uuid4().hex


def volume_record(volume: str, pod_id: str) -> str:
    """Return the path of the volume's record for the pod ``pod_id`` (``record_name``;
    ValueError for an id that names none)."""
    name = record_name(pod_id)
    if name is None:
        raise ValueError(f"pod id {pod_id!r} names no record")
    return posixpath.join(volume, ".podstate", "made", name)


def record_paths(pod_id: str | None, volume: str) -> tuple[str, ...]:
    """Return the paths of the records of the pod ``pod_id``: the container disk's, and
    the volume's (none for an id that names no record)."""
    if pod_id is None or record_name(pod_id) is None:
        return (MADE,)
    return (MADE, volume_record(volume, pod_id))


def copied(found: Made) -> str | None:
    """Return the id the container disk's record names (``found``: the probe's ``made``)
    where it is not the pod's (the provider's identity, which the probe takes over it): the
    record came with a copy of another pod's container disk, and names what that pod made,
    not this one; None otherwise."""
    record = found.records.get("disk")
    if record is None or record.state != "file" or record.problem is not None:
        return None
    return record.pod_id if record.pod_id not in (None, found.pod_id) else None


def copied_words(found: Made) -> str:
    """Return what a run says of a copied container disk's record (``copied``)."""
    return (
        f"the container disk's record names pod id {copied(found)}, not this pod's "
        f"({found.pod_id}, its provider's identity): a copy of another pod's container "
        "disk (an image baked from it), so nothing it names is removed"
    )


def trusted(found: Made) -> dict[str, str]:
    """Return, for each record the probe read (``found``: its ``made``) that podstate must
    not act on, why (empty: it may act on all): unreadable, not a record, from a newer
    podstate, or another pod's (one that names another id). The container disk's is never
    another pod's: one that names no id is adopted (that disk is this container's own, and
    the next write names the pod's id), one that names another is a copy (``copied``),
    whose entries are not this pod's and which the next write replaces."""
    problems = {}
    for where, record in found.records.items():
        problem = record.problem
        mine = record.pod_id == found.pod_id or where == "disk"
        if problem is None and record.state == "file" and not mine:
            problem = f"it is another pod's (pod id {record.pod_id or 'unknown'})"
        if problem:
            problems[where] = problem
    return problems


def own_id(found: Made) -> str:
    """Return the id this pod's records are bound to: the one the probe found (``found``:
    its ``made``; the provider's identity, else the container disk's record's) where it
    names a record, else a new one (``new_id``), which the apply writes into the container
    disk's record, where the next probe finds it."""
    pod_id = found.pod_id
    return pod_id if pod_id and record_name(pod_id) else new_id()
