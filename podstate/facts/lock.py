"""The probe's reading of the pod lock: how many times it was taken, and whether a live run
holds it (podstate.run.lock takes it from there)."""

from __future__ import annotations

from typing import Any

from podstate.paths import LOCK


def probe_lines(lock_wait: int) -> list[str]:
    """Return the probe lines that wait up to ``lock_wait`` seconds for another run's live
    lock, so that an apply plans from what that run left, not from a pod halfway through
    it, then print ``lock GEN held|free``."""
    return [
        f"L={LOCK}",
        'live() { [ -d "$L" ] && e= && { read -r e <"$L/expires"; } 2>/dev/null &&'
        ' [ "$(date +%s)" -le "${e:-0}" ]; }',
        f"n=0; while [ $n -lt {lock_wait * 5} ] && live; do sleep 0.2; n=$((n + 1)); done",
        'g=; { read -r g <"$L.gen"; } 2>/dev/null;'
        ' if live; then echo "lock ${g:-0} held"; else echo "lock ${g:-0} free"; fi',
    ]


def parse(line: str | None) -> dict[str, Any] | None:
    """Return the pod lock as the probe read it (``gen``: how many times it was taken;
    ``held``: by a live run), None if it was not read."""
    if not line:
        return None
    gen, held = line.split(" ")
    return {"gen": int(gen), "held": held == "held"}
