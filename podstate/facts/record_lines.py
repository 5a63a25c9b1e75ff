"""Whether a line of a record of what podstate made (podstate.facts.made) is one podstate
wrote: a record on a shared volume can be written by any pod's root, so a line naming a path
podstate never writes there is refused, and nothing it names removed (roles/removal.py)."""

from __future__ import annotations

import posixpath

from podstate.facts.record import AptEntry, Entry, Made, SavedEntry
from podstate.paths import SAVED, SECRETS_FILE


def plain(path: str) -> bool:
    """Return whether ``path`` is one podstate writes in a record: absolute (or under
    ``~/``), below the root, without ``.``, ``..``, ``//`` or a trailing ``/``; any other is
    one a hand wrote there, which podstate must not follow."""
    rest = path[1:] if path.startswith("/") else path[2:] if path.startswith("~/") else ""
    return bool(rest) and all(part not in ("", ".", "..") for part in rest.split("/"))


def places(kind: str, homes: tuple[str, ...]) -> tuple[str, ...] | None:
    """Return the only paths an entry of ``kind`` may name: the secrets file; the archived
    host keys and the boot hook's data in one of ``homes`` (where the hook lives: on the
    volume, or on the container disk); None for a kind that may be anywhere."""
    return {
        "secrets": (SECRETS_FILE,),
        "data": tuple(posixpath.join(home, "boot") for home in homes),
        "keys": tuple(posixpath.join(home, "boot", "hostkeys.tar") for home in homes),
    }.get(kind)


def refused(entry: Entry, found: Made, volume: str, homes: tuple[str, ...]) -> str | None:
    """Return why podstate must not act on ``entry`` of the records the probe read
    (``found``: its ``made``), in words (None: it may): its path, or a saved copy's, is not
    ``plain``, or not where its kind lives (``places`` in ``homes``; a saved copy under
    /etc/podstate/saved), or it is in the volume's record but not on the ``volume``."""
    path = entry.path
    if isinstance(entry, AptEntry):
        return None
    if not plain(path):
        return f"{path}: the record names it by a path podstate never writes (., .. or //)"
    allowed = places(entry.kind, homes)
    if allowed is not None and path not in allowed:
        where = " or ".join(allowed)
        return f"{path}: the record names it as {entry.kind}, which podstate keeps only at {where}"
    if isinstance(entry, SavedEntry):
        copy = entry.copy
        if not plain(copy) or not copy.startswith(SAVED + "/"):
            return f"{path}: the record names its saved copy at {copy}, not under {SAVED}"
    record = found.records.get("volume")
    on = path == volume or path.startswith(volume.rstrip("/") + "/")
    if record is not None and record.entries.get(path) == entry and not on:
        return f"{path}: the volume's record names it, but it is not on the volume {volume}"
    return None
