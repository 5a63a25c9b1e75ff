"""Container disk: too little free space to change anything safely is a violation."""

from __future__ import annotations

from typing import Any

from podstate import findings
from podstate.sizes import format_size

MIN_FREE = 64 << 20  # managed files need little, but a pod with less is about to fail anyway


def has_room(probe: dict[str, Any]) -> bool:
    """Return whether the pod's container disk has room for changes; else record why not.

    A full disk makes every write fail half-way through a run, so podstate leaves such a
    pod exactly as it is and says so, instead of trying.
    """
    free, size = probe["disk_free"], probe["disk_size"]
    if free is None or free >= MIN_FREE:
        return True
    findings.violation(
        f"the container disk (/) is full: {format_size(free)} free of {format_size(size)}; "
        "podstate changed nothing on this pod: free space (pip and uv caches, old "
        "checkpoints) or recreate the pod with a larger container disk",
        role="Container disk",
    )
    return False
