"""What the ready marker and the applied record say (not a role itself): the digest of what a
desired state applies, and reading either file back from the probe.

The ready role writes them; the boot hook's role reads them too, so both take them from here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from podstate.desired.state import State
from podstate.desired.typed import as_data
from podstate.facts.files import FileInfo

# Keys of the desired state that change no pod: what a pod must be fit for (a pod that is
# not has a violation, and no marker), how findings are waived, how the watch loop treats it.
NOT_APPLIED = ("gpu", "disk", "download", "waivers", "watch")


def applies_nothing(wanted: State) -> bool:
    """Return whether ``wanted`` makes nothing on a pod (``{}``, or only what no pod is
    changed for): then podstate puts nothing there, not even its ready marker."""
    return not set(as_data(wanted)) - {*NOT_APPLIED, "disk_reserve"}


def digest(wanted: State) -> str:
    """Return the digest of what a desired state applies to a pod: what a marker says was
    applied. Keys that change no pod (``NOT_APPLIED``) do not count; secrets count by where
    they come from, never by their values (which the desired state does not hold)."""
    applied = {k: v for k, v in as_data(wanted).items() if k not in NOT_APPLIED}
    text = json.dumps(applied, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def read(found: FileInfo | None) -> dict[str, Any] | None:
    """Return a marker's or a record's fields, None when there is none (or it is unreadable
    or not podstate's)."""
    if found is None or found.state != "file" or not found.content:
        return None
    try:
        fields = json.loads(found.content)
    except ValueError:
        return None
    return fields if isinstance(fields, dict) and isinstance(fields.get("digest"), str) else None
