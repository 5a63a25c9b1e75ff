"""Container disk: too little free space to change anything safely is a violation.

Two thresholds, both read from the one probe:

* ``MIN_FREE`` (64 MiB): below it the disk is full, whatever the desired state asks (free
  space that cannot be read counts as too little: nothing says there is room);
* ``disk_reserve`` (default 2G): below it, a pod whose desired state puts scratch paths,
  ``dirs`` variables or the venv on the container disk would fill it with what they hold
  (temp files, pip and uv caches, packages), and a full container disk breaks everything
  else there too: the venv, the shell, every later install.
"""

from __future__ import annotations

from podstate.desired.state import State
from podstate.facts.mounts import Mount, mount_of
from podstate.facts.probe import Probe
from podstate.facts.request import Request
from podstate.roles import scratch
from podstate.run import findings
from podstate.run.role import role
from podstate.sizes import format_size

MIN_FREE = 64 << 20  # managed files need little, but a pod with less is about to fail anyway


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: the free space at each ``disk.min_free``
    path, and the paths whose mount says whether they are on the container disk (scratch,
    ``dirs``, the venv)."""
    venv = [wanted.venv.path] if wanted.venv else []
    places = (*wanted.scratch_paths, *wanted.dir_paths, *venv)
    return Request(paths=places, free=tuple(wanted.disk.min_free if wanted.disk else ()))


def _below(path: str, top: str) -> bool:
    """Return whether ``path`` is ``top`` or inside it."""
    return path == top or path.startswith(top.rstrip("/") + "/")


def on_container_disk(wanted: State, probe: Probe) -> list[str]:
    """Return what the desired state places on the container disk, in words for a message.

    Each entry names a scratch path (``scratch /scratch``), a ``dirs`` variable with its
    path (``TMPDIR=/scratch/tmp``) or the venv (``venv.path=/opt/venv``), in that order. The
    container disk is the mount holding ``/``; a path counts when its mount is that one and
    it is not below a scratch path that is or will be a tmpfs. Empty when the probe saw no
    mount for ``/`` (nothing can be said about it).
    """
    root = mount_of("/", probe.mounts)
    if root is None:
        return []
    own = [(path, probe.paths[path].real) for path in scratch.own_mounts(wanted, probe)]

    def on_root(path: str) -> bool:
        info = probe.paths[path]
        mount: Mount | None = info.mount
        inside = any(_below(path, top) or _below(info.real, real) for top, real in own)
        return not inside and mount == root

    found = [f"scratch {path}" for path in wanted.scratch_paths if on_root(path)]
    found += [f"{name}={path}" for name, path in (wanted.dirs or {}).items() if on_root(path)]
    if wanted.venv and on_root(wanted.venv.path):
        found.append(f"venv.path={wanted.venv.path}")
    return found


def has_room(probe: Probe, wanted: State) -> bool:
    """Return whether the pod's container disk has room for changes; else record why not.

    A full disk (under ``MIN_FREE``) makes every write fail half-way through a run; a disk
    with less free than ``disk_reserve`` that the desired state fills with temp files and
    caches is about to be full. Either way podstate leaves the pod exactly as it is and
    says so (naming, for the second, what would fill it), instead of trying. Free space that
    cannot be read is unknown, not enough: the same, with a violation that says so.
    """
    free, size = probe.disk_free, probe.disk_size
    if free is None or size is None:  # one reading: both or neither
        findings.violation(
            "the free space of the container disk (/) cannot be read (`stat -f /` failed on "
            "the pod), so whether it has room for this run's changes is unknown; podstate "
            "changed nothing on this pod: see why `stat -f /` fails there, or recreate the pod",
            "disk.unreadable",
        )
        return False
    if free < MIN_FREE:
        findings.violation(
            f"the container disk (/) is full: {format_size(free)} free of "
            f"{format_size(size)}; podstate changed nothing on this pod: free space (pip and "
            "uv caches, old checkpoints) or recreate the pod with a larger container disk",
            "disk.full",
        )
        return False
    reserve = wanted.disk_reserve
    placed = on_container_disk(wanted, probe) if free < reserve else []
    if not placed:
        return True
    findings.violation(
        f"the container disk (/) has {format_size(free)} free of {format_size(size)}, less "
        f"than disk_reserve {format_size(reserve)}, and the desired state puts "
        f"{', '.join(placed)} there; podstate changed nothing on this pod: free space, "
        "recreate the pod with a larger container disk, point those at a tmpfs or another "
        "local disk, or lower disk_reserve for this pod",
        "disk_reserve",
    )
    return False


def min_free(wanted: State, probe: Probe) -> list[tuple[str, str]]:
    """Return the violations (finding id, message) of ``disk.min_free``: each path with less
    free space than asked, or whose free space cannot be read."""
    found = []
    for path, minimum in (wanted.disk.min_free if wanted.disk else {}).items():
        free = probe.free.get(path)
        if free is None:
            message = f"cannot read the free space at {path} (does it exist?): check the pod"
        elif free < minimum:
            message = (
                f"{path} has {format_size(free)} free, less than {format_size(minimum)}: free "
                "space there (old checkpoints, caches) or recreate the pod with a larger disk"
            )
        else:
            continue
        found.append((f"disk.min_free.{path}", message))
    return found


@role("Container disk", reads)
def apply(wanted: State, probe: Probe) -> bool:
    """Return whether the container disk has room for this run's changes (``has_room``);
    record ``disk.min_free`` violations, which change nothing."""
    for finding, message in min_free(wanted, probe):
        findings.violation(message, finding)
    return has_room(probe, wanted)
