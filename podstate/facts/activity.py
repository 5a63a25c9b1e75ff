"""Whether a pod is in use now, from one probe: its GPUs' utilization, memory in use and
compute processes, its interactive sessions, and what its processes did since its idle
period began (podstate.facts.work).

A pod is idle only when every GPU reads 0 %, no compute process runs on any GPU, no GPU has
more than ``IDLE_MEMORY_MIB`` in use (a loaded model waiting for requests reads 0 % with its
memory full), no terminal or notebook kernel is open, and since the pod's idle period began
its processes used little CPU and I/O, none started or ended, and no other SSH session ran.
Any reading that cannot be made (a GPU, a process podstate cannot read, the period itself)
makes the answer unknown (None), never idle: decisions on it take the safe side.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from podstate.facts import work
from podstate.facts.gpu import IDLE_MEMORY_MIB, GpuState
from podstate.facts.probe import Probe


def _gpus(state: GpuState) -> list[dict[str, Any]]:
    """Return each GPU's reading: index, utilization, memory in use, its compute processes."""
    apps = state.apps or ()
    return [
        {
            "index": device.index,
            "utilization": device.utilization,
            "memory_used_mib": device.memory_used_mib,
            "processes": [
                {"pid": app.pid, "name": app.name}
                for app in apps
                if device.uuid is not None and app.gpu_uuid == device.uuid
            ],
        }
        for device in state.devices
    ]


def read(probe: Probe, now: datetime | None = None) -> dict[str, Any]:
    """Return what the probe says of the pod's use: ``idle`` (True, False, or None when a
    reading is unknown), ``in_use`` (why it is not idle, in words), ``unknown`` (what could
    not be read), ``gpus`` (each GPU's reading), ``processes`` (every compute process:
    ``pid``, ``name``, ``gpu_uuid``), ``sessions`` (the probe's: ``pid``, ``kind``,
    ``command``) and ``idle_for`` (seconds
    since the pod's idle period began, by the clock kept on the pod; None when unknown, and
    0 when the probe saw work: a new period begins), ``idle_since`` (when that period began,
    RFC 3339 in UTC, to the second below: ``now``, the probe's answer's time, less
    ``idle_for``; None when unknown) and ``container`` (the container start
    it is for, ``BOOT_ID:TICKS``; None when unread), which tells the watch a restart on a
    provider that lists no start time (Vast)."""
    state: GpuState = probe.gpu
    in_use: list[str] = []
    unknown: list[str] = []
    if not state.readable:
        unknown.append(f"the GPUs: {state.error}")
    for device in state.devices:
        name = f"GPU {device.index}"
        if device.utilization is None:
            unknown.append(f"{name} utilization")
        elif device.utilization > 0:
            in_use.append(f"{name} at {device.utilization} %")
        if device.memory_used_mib is None:
            unknown.append(f"{name} memory in use")
        elif device.memory_used_mib > IDLE_MEMORY_MIB:
            in_use.append(f"{name} has {device.memory_used_mib} MiB in use")
    if state.apps is None:
        unknown.append("the GPUs' compute processes")
    for app in state.apps or ():
        in_use.append(f"compute process {app.name} (pid {app.pid})")
    for session in probe.sessions:
        what = "terminal" if session.kind == "tty" else "notebook kernel"
        in_use.append(f"{what} {session.command} (pid {session.pid})")
    found = probe.work
    in_use += [work.describe(sign) for sign in found.busy]
    for process in found.unread:
        unknown.append(
            f"what {process.command} (pid {process.pid}) does (another user's: root has"
            " no CAP_SYS_PTRACE here)"
        )
    if found.age is None:
        unknown.append("the idle period: podstate cannot keep its clock on this pod")
    idle = False if in_use else (None if unknown else True)
    return {
        "idle": idle,
        "in_use": in_use,
        "unknown": unknown,
        "gpus": _gpus(state),
        "processes": [
            {"pid": app.pid, "name": app.name, "gpu_uuid": app.gpu_uuid} for app in state.apps or ()
        ],
        "sessions": [asdict(session) for session in probe.sessions],
        "idle_for": found.age,
        "idle_since": _since(found.age, now),
        "container": probe.container_start,
    }


def _since(age: float | None, now: datetime | None) -> str | None:
    """Return when a period ``age`` seconds old at ``now`` (default: the clock now) began, in
    RFC 3339 (UTC), to the second below; None when its age is unknown."""
    if age is None:
        return None
    began = (now or datetime.now(UTC)) - timedelta(seconds=age)
    return began.strftime("%Y-%m-%dT%H:%M:%SZ")
