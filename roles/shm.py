"""Shared memory: /dev/shm must be at least ``min_size``."""

from __future__ import annotations

from podstate.desired.state import State
from podstate.facts.probe import Probe
from podstate.facts.request import Request
from podstate.run import bookkeeping, findings
from podstate.run.role import role
from podstate.sizes import format_size


def reads(wanted: State) -> Request:  # the roles' contract
    """Return what the probe reads for this role: nothing more than it always reads
    (/dev/shm, and whether the pod may mount)."""
    return Request()


@role("Shared memory", reads, when=lambda wanted: wanted.shm)
def apply(wanted: State, probe: Probe) -> None:
    """Grow /dev/shm where the pod may remount it; record a violation where it may not."""
    if wanted.shm is None:  # when= says so
        return
    size, minimum = probe.shm_size, wanted.shm.min_size
    if size is not None and size >= minimum:
        return
    if probe.can_mount and size is not None:
        bookkeeping.tmpfs(
            name="Grow /dev/shm", path="/dev/shm", size=minimum, mode="1777", mounted_size=size
        )
        return
    have = "missing" if size is None else format_size(size)
    findings.violation(
        f"/dev/shm is {have}, below the minimum {format_size(minimum)}: PyTorch DataLoader "
        'workers die with "Bus error" and NCCL fails to create shared-memory segments; '
        "this pod cannot remount it, so recreate it on a host or template with a larger "
        "/dev/shm (docker --shm-size) or lower shm.min_size",
        "shm.min_size",
    )
