"""A sandbox pod's cgroups: its processes' CPU time and I/O counted apart from every other
process's, as a container's are, and shown inside it as Docker shows a container's.

Each pod start gets a cgroup of its own in each of the machine's cgroup v1 hierarchies of
``CONTROLLERS`` that is mounted and writable (``make``, which names them in the pod's
``cgroups`` file). The pod's bootstrap moves itself into them before it starts anything, and
binds each over the pod's ``/sys/fs/cgroup/CONTROLLER``, where the pod reads its own
counters at its hierarchy's root; the machine's hierarchies are hidden from it, so a pod
never reads the machine's counters for its own. ``usage`` reads them from outside (the
benchmarks), ``remove`` takes them away once the pod's processes have ended.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

BASE = Path("/sys/fs/cgroup")
CONTROLLERS = ("cpuacct", "blkio")
FILE = "cgroups"  # in the pod's state directory: "CONTROLLER PATH" a line


def _path(pod_dir: Path, controller: str) -> Path:
    """Return the cgroup of the pod whose state directory is ``pod_dir`` in ``controller``'s
    hierarchy: named by that directory, so two sandboxes' pods never share one."""
    name = hashlib.sha256(str(pod_dir.resolve()).encode()).hexdigest()[:16]
    return BASE / controller / "podstate-sandbox" / name


def make(pod_dir: Path) -> None:
    """Give the pod a new cgroup in each hierarchy that can have one (its last start's,
    empty by now, removed first), and name them in its ``cgroups`` file."""
    remove(pod_dir)
    lines = []
    for controller in CONTROLLERS:
        path = _path(pod_dir, controller)
        try:
            path.mkdir(parents=True)
        except OSError:
            continue
        lines.append(f"{controller} {path}\n")
    (pod_dir / FILE).write_text("".join(lines))


def remove(pod_dir: Path) -> None:
    """Remove the pod's cgroups, whose processes have all ended (one that still has any
    stays, and goes at the pod's next start or removal)."""
    remove_all(_path(pod_dir, controller) for controller in CONTROLLERS)


def held_by(pids: Iterable[int]) -> set[Path]:
    """Return the pods' cgroups (in ``podstate-sandbox``) that the processes ``pids`` are in,
    read from the processes themselves: ``remove_all`` takes them away once they have ended,
    where the pods' state directories, which name them, are gone."""
    found = set()
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:  # ID:CONTROLLER[,CONTROLLER...]:PATH
            _, names, path = line.split(":", 2)
            if path.startswith("/podstate-sandbox/"):
                mine = [name for name in names.split(",") if name in CONTROLLERS]
                found |= {BASE / name / path[1:] for name in mine}
    return found


def remove_all(paths: Iterable[Path]) -> None:
    """Remove the cgroups ``paths`` (``held_by``'s) whose processes have all ended."""
    for path in paths:
        try:
            path.rmdir()
        except OSError:
            pass


def usage(pod_dir: Path) -> tuple[int | None, int | None]:
    """Return the CPU time (nanoseconds) and the bytes read and written on block devices
    of the pod's processes since its start; None for what cannot be read."""
    cpu = io = None
    try:
        cpu = int((_path(pod_dir, "cpuacct") / "cpuacct.usage").read_text())
    except (OSError, ValueError):
        pass
    try:
        text = (_path(pod_dir, "blkio") / "blkio.throttle.io_service_bytes").read_text()
        io = sum(int(x.split()[-1]) for x in text.splitlines() if x.startswith("Total"))
    except (OSError, ValueError, IndexError):
        pass
    return cpu, io
