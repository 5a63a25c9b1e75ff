"""Which container start the probe reads: the kernel's boot id and the start time of
process 1 (field 22 of ``/proc/1/stat``, in clock ticks since boot).

Vast keeps the container disk across a stop and start, and podstate's ready marker with
it, while processes, tmpfs mounts and ``/dev/shm`` are new. The pair tells one container
start from another on any provider: a new boot, or the same boot with process 1 started
again. The ready role records it in the marker (roles/ready.py), the boot hook too
(scripts/boot.sh, with the same shell), and a marker from another start is not ready.
"""

from __future__ import annotations

import re

from podstate.facts.section import Section

# One line "cstart BOOT_ID TICKS", or nothing when either cannot be read (no process: the
# comm field, which may hold spaces and ")", is cut off up to its last ") ", after which
# field 22 is the 20th word).
PROBE_LINE = (
    "{ read -r b </proc/sys/kernel/random/boot_id && read -r s </proc/1/stat &&"
    ' s=${s##*) } && c() { echo "cstart $b ${20}"; } && c $s; } 2>/dev/null'
)
_BOOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # fullmatch


def parse(value: str | None) -> str | None:
    """Return the container start as ``BOOT_ID:TICKS`` (how markers record it), None when
    the probe could not read it (unknown: no marker is taken for this start's then)."""
    boot_id, _, ticks = (value or "").partition(" ")
    if not _BOOT_ID.fullmatch(boot_id) or not re.fullmatch(r"[0-9]+", ticks):
        return None
    return f"{boot_id}:{ticks}"


SECTION = Section(
    "start",
    fields=("container_start",),
    parse=lambda answer: {"container_start": parse(answer.value("cstart"))},
    lines=lambda arguments: (PROBE_LINE,),
)
