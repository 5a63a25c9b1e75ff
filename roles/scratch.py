"""Scratch storage: a tmpfs where the pod may mount, else a directory on local disk; a tmpfs
podstate mounted is unmounted once it leaves the desired state (``unmount``, which
roles/removal.py calls)."""

from __future__ import annotations

from podstate.desired.sections import parents_first
from podstate.desired.state import State
from podstate.facts import made
from podstate.facts.files import PathInfo
from podstate.facts.mounts import Mount, mount_of
from podstate.facts.probe import Probe
from podstate.facts.record import DirEntry, Entry, MountEntry
from podstate.facts.request import Request
from podstate.operations import removal as ops
from podstate.run import bookkeeping, findings
from podstate.run.role import role
from podstate.sizes import format_size


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: every scratch path, and the records of
    what podstate made (a mount or directory there before podstate is not podstate's)."""
    if not wanted.scratch_paths:
        return Request()
    paths = wanted.scratch_paths
    return Request(paths=paths, occupied=paths, made=made.request(wanted))


def _mounted_at(info: PathInfo) -> Mount | None:
    """Return the mount whose root is exactly at the probed path, None when there is none."""
    return info.mount if info.mount is not None and info.mount.target == info.real else None


def _mountable(path: str, probe: Probe) -> bool:
    """Return whether this run mounts a new tmpfs at the scratch ``path``: the pod may mount,
    none is there yet, and the directory holds nothing the tmpfs would hide."""
    return probe.can_mount and not _mounted_at(probe.paths[path]) and path not in probe.occupied


def own_mounts(wanted: State, probe: Probe) -> list[str]:
    """Return the scratch paths that are, or after this run will be, a mount of their own
    (a mount already there, or a tmpfs this pod mounts): not on the container disk."""
    return [p for p in wanted.scratch_paths if _mounted_at(probe.paths[p]) or _mountable(p, probe)]


def fresh_mounts(wanted: State, probe: Probe) -> list[str]:
    """Return the scratch paths that get a new, empty tmpfs in this run.

    Directories below them disappear under the new mount, so other roles must treat them
    as missing.
    """
    return [p for p in wanted.scratch_paths if _mountable(p, probe)]


@role("Scratch", reads)
def apply(wanted: State, probe: Probe) -> None:
    """Converge each scratch path: a tmpfs where the pod may mount, else a local directory."""
    old, scratch = made.previous(probe.made), wanted.scratch or {}
    for path in ordered(wanted, probe):
        info, item = probe.paths[path], scratch[path]
        if in_the_way(info):
            findings.violation(
                f"scratch {path} is a {info.kind}, not a directory: podstate neither mounts "
                "over it nor replaces it; move it away (the next apply makes the scratch) or "
                "choose another scratch path",
                f"scratch.{path}",
            )
            continue
        mount = info.mount
        at_path = _mounted_at(info)
        hidden = None if at_path or not probe.can_mount else probe.occupied.get(path)
        _declare(path, info, old.get(path), can_mount=probe.can_mount and hidden is None)
        size = format_size(item.size)
        if at_path and at_path.fstype != "tmpfs":
            findings.violation(
                f"scratch {path} is already a {at_path.fstype} mount from {at_path.source}; "
                "podstate will not hide it: choose another scratch path or unmount it",
                f"scratch.{path}",
            )
        elif hidden is not None:
            findings.violation(_hiding(path, info, hidden, probe), f"scratch.{path}")
        elif probe.can_mount:
            bookkeeping.tmpfs(
                name=f"Scratch {path} as tmpfs",
                path=path,
                size=item.size,
                mode=item.mode,
                mounted_size=at_path.size if at_path else None,
                mounted_mode=info.mode if at_path else None,
            )
        elif at_path:
            bookkeeping.directories(
                name=f"Scratch {path} as tmpfs (preexisting, cannot resize)",
                paths={path: item.mode},
                found=probe.paths,
            )
        elif mount is not None and mount.is_network:
            findings.violation(
                f"scratch {path} ({size}) would be on the network filesystem {mount.fstype} "
                f"at {mount.target}, and this pod cannot mount a tmpfs (no CAP_SYS_ADMIN): "
                "choose a path on the container disk such as /scratch",
                f"scratch.{path}",
            )
        else:
            bookkeeping.directories(
                name=f"Scratch {path} as local-disk directory (pod cannot mount tmpfs)",
                paths={path: item.mode},
                found=probe.paths,
            )


def ordered(wanted: State, probe: Probe) -> list[str]:
    """Return the scratch paths, each after those it lies below where the pod resolves
    them (through links): the order the apply and the boot hook mount them in."""
    return parents_first(list(wanted.scratch_paths), lambda p: probe.paths[p].real or p)


def in_the_way(info: PathInfo) -> bool:
    """Return whether what stands at a scratch path is no directory (a regular file, a
    socket, ...), which podstate neither mounts over nor replaces."""
    return info.kind is not None and info.kind != "directory"


def _hiding(path: str, info: PathInfo, entry: str, probe: Probe) -> str:
    """Return the violation's words for a scratch ``path`` whose directory holds ``entry``
    (the one the probe named): files a tmpfs would hide, or a mount (another scratch's)."""
    inner = f"{info.real.rstrip('/')}/{entry}"
    if any(m.target == inner for m in probe.mounts):
        return (
            f"scratch {path} holds the mount {inner}: a tmpfs mounted over it would hide that "
            f"mount; unmount it and remove its mount point (what is on it goes), and the next "
            f"apply mounts {path}, then any scratch declared below it"
        )
    return (
        f"scratch {path} holds {_contents(entry)}: a tmpfs mounted over it would hide them, "
        "and what is written there afterwards would vanish at the next restart; move them "
        "out (the next apply mounts the tmpfs) or choose another scratch path"
    )


def _contents(entry: str) -> str:
    """Return what a directory holds in words, from the one entry the probe named in it
    ("?": it could not read it)."""
    return "what podstate cannot read" if entry == "?" else f"files (among them {entry})"


def _declare(path: str, info: PathInfo, was: Entry | None, *, can_mount: bool) -> None:
    """Record what podstate makes at the scratch ``path``: a tmpfs it mounts (and the mount
    point, when missing), or the directory it creates; what was there before is not its own."""
    created = info.kind is None or (isinstance(was, MountEntry) and was.made)
    if isinstance(was, DirEntry):
        created = True
    at_path = _mounted_at(info)
    mine = at_path is not None and at_path.source == "podstate"
    if can_mount and (not _mounted_at(info) or mine or isinstance(was, MountEntry)):
        findings.made(MountEntry(path, created))
    elif created and not _mounted_at(info):
        findings.made(DirEntry(path, True))  # a scratch directory: the venv's caches may be in it


def unmount(
    entry: MountEntry,
    probe: Probe,
    *,
    uninstall: bool = False,
    discard: bool = False,
    staying: set[str],
) -> Entry | None:
    """Plan unmounting the tmpfs podstate mounted at ``entry.path`` (then removing its mount
    point, when podstate made it and it is empty), which left the desired state
    (roles/removal.py), or goes with ``uninstall``; one that a process uses stays mounted,
    and one that holds files (or may: one podstate cannot read) too, unless ``discard``
    (``podstate uninstall --discard-scratch``): a violation naming the processes or a file,
    and the record keeps it; so does one with a mount of ``staying`` (what stays mounted,
    which a planned unmount takes ``entry.path`` out of) below it, which the kernel would
    not unmount. Return what the record names afterwards: a tmpfs already gone (a restart
    took it) leaves its mount point, when podstate made it, as a directory; a mount of
    someone else's there now is not podstate's (named, forgotten)."""
    path, made_it, found = entry.path, entry.made, probe.made_found()
    if (there := found.kinds.get(path)) != "mount":  # unmounted already (a restart, say)
        return DirEntry(path) if made_it and there == "directory" else None  # its mount point
    shown = mount_of(path, probe.mounts)  # the one seen there: the last
    if shown is not None and shown.target == path and shown.source != "podstate":
        findings.left(
            path,
            f"{path} is a {shown.fstype} mount of someone else's now (from {shown.source}), "
            "not the tmpfs podstate mounted: left as it is",
        )
        return None
    gone, next_run = ("to go", "uninstall") if uninstall else ("no longer declared", "apply")
    if inner := sorted(p for p in staying if p.startswith(f"{path.rstrip('/')}/")):
        findings.violation(
            f"scratch {path} is {gone}, but the mount at {inner[0]} stays in it: "
            f"podstate unmounts {path} once nothing is mounted below it (unmount or undeclare "
            f"{inner[0]} too, or declare {path} again)",
            "removal.scratch",
        )
        return entry
    if busy := found.busy.get(path):
        findings.violation(
            f"scratch {path} is {gone}, but {made.using(busy, 'uses')}: podstate "
            "does not unmount a tmpfs in use (what is on it would vanish from under them); "
            f"stop them, and the next {next_run} unmounts it",
            "removal.busy",
        )
        return entry
    held = found.held.get(path)
    if held and not discard:
        what = _contents(held)
        then = (
            "`podstate uninstall --discard-scratch` discards the rest with it"
            if uninstall
            else f"empty it to discard the rest (`find {path} -mindepth 1 -delete`), and the "
            "next apply unmounts it"
        )
        findings.violation(
            f"scratch {path} is {gone}, but holds {what}: podstate does not unmount a tmpfs "
            f"with files in it (they would be lost with it); move what you need, then {then}",
            "removal.scratch",
        )
        return entry
    staying.discard(path)
    ops.unmount(
        name=f"Unmount {path}",
        path=path,
        remove=made_it,
        discard=discard,
        what=f"would remove: the tmpfs at {path}"
        + (", and the files in it" if held else "")
        + (" and its mount point" if made_it else ""),
    )
    return None
