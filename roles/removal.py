"""Removal: what podstate made on a pod and no longer declares leaves it, and the record of
what podstate made (podstate.facts.made) says what that is.

Every role says what it makes or edits (``findings.made``). This role, planned after them,
compares that with the records the probe read: what a record names and this run does not
make is removed (a file podstate created, while it still holds what podstate wrote), or put
back (a user's file podstate wrote over, podstate's block in a user's file), and the boot
hook is disarmed (a stub that does nothing: the template's start command still sources it).
What holds something else now is left as it is, and forgotten. A record podstate cannot act
on (unreadable, from a newer podstate, another pod's) stops every removal on the pod, with
a violation saying why.

The records are written twice in the apply's one command: first (before any other change)
naming both what was made and what this run makes, then, after the removals, what is made
now. A run killed anywhere leaves each item as before or as after, and a record that names
it, so the next run finishes the job.
"""

from __future__ import annotations

import posixpath

from pyinfra import host

from podstate.desired.state import State
from podstate.facts import blocks, made, record_id, record_lines
from podstate.facts.boot import IDENTITY
from podstate.facts.probe import Probe
from podstate.facts.record import (
    AptEntry,
    BlockEntry,
    DataEntry,
    DirEntry,
    Entry,
    FoundEntry,
    HookEntry,
    KeysEntry,
    MountEntry,
    RepoEntry,
    SavedEntry,
    SecretsEntry,
    SnapshotEntry,
    StubEntry,
    VenvEntry,
)
from podstate.facts.request import Request
from podstate.operations import records as record_ops
from podstate.operations import removal as ops
from podstate.operations.boot import Layout
from podstate.paths import VOLUME
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.roles import boot
from podstate.roles.env import STICKY
from podstate.roles.scratch import unmount
from podstate.run import bookkeeping, findings
from podstate.run.role import role

STUB = (
    "# podstate's boot hook, disarmed: it does nothing. The template's container start\n"
    "# command can drop the hook ('. <this file>;'); `podstate uninstall` removes this file.\n"
    ":\n"
)


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: the records, what they name, and the
    volume's records' folder (its mode: ``record_ops.plan`` tightens it)."""
    folder = posixpath.join(boot.volume(wanted).volume, ".podstate", "made")
    return Request(made=made.request(wanted), paths=(folder,))


def take_block(text: str, begin: str, end: str) -> str | None:
    """Return ``text`` without podstate's blocks (``blocks.split``), every other line as it
    was. None when a mark is lone: which of the lines beside it are podstate's cannot be
    told (in ~/.ssh/authorized_keys, the keys someone logs in with)."""
    found = blocks.split(text, begin, end)
    return None if found.lone else "".join(found.lines)


def undo(
    entry: Entry,
    probe: Probe,
    *,
    uninstall: bool,
    staying: set[str],
    packages: bool = False,
    keep_venv: bool = False,
    records: tuple[str, ...] = (),
    discard_scratch: bool = False,
    volume: str = VOLUME,
) -> Entry | None:
    """Plan taking ``entry`` away as the probe found it (apt packages only with
    ``packages``; the venv and its snapshot not with ``keep_venv``; ``records``: the records'
    paths on the pod, which a removal checks the file against; a tmpfs that holds files
    only with ``discard_scratch``, none with one of ``staying`` below; ``volume``: where the
    volume is); return what the record names afterwards (a disarmed boot hook's stub, what
    stays), None when nothing; a line podstate did not write is named, nothing removed."""
    path, files, found = entry.path, probe.files, probe.made_found()
    if isinstance(entry, FoundEntry):
        return None  # the user's file, which held what podstate would write: kept
    homes = tuple(Layout(volume, provider).home for provider in IDENTITY)
    if why := record_lines.refused(entry, found, volume, homes):
        findings.left(path, f"{why}: not podstate's to remove; left as it is")
        return None
    if path in found.others:
        findings.left(
            path,
            f"{path} is in another pod's record on the volume too (a pod sharing it made it "
            "as well): left as it is",
        )
        return None
    if isinstance(entry, AptEntry):
        return _package(entry, probe, uninstall=uninstall, remove=packages)
    if isinstance(entry, VenvEntry | SnapshotEntry):
        return _venv(entry, probe, keep=keep_venv, uninstall=uninstall)
    info = files.get(path)
    same = made.same(entry, found)
    content = info.content if info is not None else None
    if isinstance(entry, MountEntry):
        left = unmount(entry, probe, uninstall=uninstall, discard=discard_scratch, staying=staying)
        if isinstance(left, DirEntry):  # unmounted already: the mount point goes now, if empty
            _own(left, probe)
            return None
        return left
    if isinstance(entry, RepoEntry):
        if found.kinds.get(path) != "repo":
            return None
        if not found.same.get(path):
            work = found.work.get(path) or "what git cannot read"
            findings.left(path, f"{path} has work of someone's own in it ({work}): left as it is")
            return None
        emptied = entry.emptied
        what = f"would remove: the checkout {path}" + (", emptied" if emptied else "")
        ops.remove_checkout(name=f"Remove {path}", path=path, keep_directory=emptied, what=what)
        return None
    if isinstance(entry, SecretsEntry | KeysEntry | DataEntry | DirEntry):
        _own(entry, probe)
        return None
    if isinstance(entry, SavedEntry):
        return _put_back(entry, probe, uninstall=uninstall)
    if info is None or info.state in ("absent", "dangling"):
        return None  # gone already
    if isinstance(entry, BlockEntry):
        begin, end = entry.marks
        if content is None:
            return None
        rest = take_block(content, begin, end)
        if rest == content:
            return None  # no line of podstate's left: the block is gone already
        if rest is None:
            lone = blocks.split(content, begin, end).lone
            findings.violation(
                f"{blocks.lost(path, begin, end, lone)}: podstate cannot tell its lines from "
                "the ones beside the mark, so it removes nothing there; put the lost mark back "
                "around podstate's lines (or take them out, with the mark, by hand), and the "
                "next run finishes",
                "removal.block",
            )
            return entry
        gone = entry.created and not rest.strip()
        ops.put_back(
            name=f"Take podstate's block out of {path}",
            path=path,
            current=content,
            content=None if gone else rest,
            what=f"would remove: podstate's block in {path}",
        )
        return None
    if not same:
        if isinstance(entry, HookEntry | StubEntry) and content == STUB:
            return StubEntry(path, made.sums(STUB))  # the hook is disarmed already
        findings.left(path, f"{path} holds what podstate did not write: left as it is")
        return None
    if isinstance(entry, HookEntry) and not uninstall:
        bookkeeping.managed_file(
            name=f"Disarm the boot hook {path}: a stub that does nothing; the template's "
            "container start command can drop it",
            path=path,
            content=STUB,
            found=info,
            own=True,
        )
        return StubEntry(path, made.sums(STUB))
    if isinstance(entry, StubEntry) and not uninstall:
        return entry
    ops.remove_file(name=f"Remove {path}", path=path, content=content, records=records)
    return None


def _put_back(entry: SavedEntry, probe: Probe, *, uninstall: bool) -> Entry | None:
    """Plan putting back the user's file that a ``saved`` entry names, as it was before
    podstate wrote over it: its content, and the mode and owner the record names (a record
    without them: the file keeps those it has). A file that no longer holds what podstate
    wrote, or is gone, is left as it is; while the copy of the user's file is there, a
    violation names it and where it is, and the record keeps the entry (forgotten, the copy
    would sit in a root-only directory that nothing names). Return what the record names
    afterwards."""
    path, files = entry.path, probe.files
    copy = entry.copy
    info, original = files.get(path), files.get(copy)
    kept = original is not None and original.state == "file" and original.content is not None
    there = info is not None and info.state not in ("absent", "dangling")
    if info is not None and there and made.same(entry, probe.made_found()):
        if original is None or not kept:
            findings.left(
                path, f"{path}: the copy of the user's file is gone ({copy}): left as it is"
            )
            return None
        mode, owner = entry.mode, entry.owner
        ops.put_back(
            name=f"Put back {path}",
            path=path,
            current=info.content or "",
            content=original.content,
            what=f"would put back: {path} as it was before podstate wrote it",
            mode=mode,
            owner=owner,
        )
        ops.remove_paths(
            name=f"Remove {copy}", paths=[copy], directories=[], what=f"would remove: {copy}"
        )
        return None
    if not kept:
        if there:
            findings.left(path, f"{path} holds what podstate did not write: left as it is")
        return None
    findings.violation(
        f"{path} is {'to go' if uninstall else 'no longer declared'}, but "
        + (
            "it holds what podstate did not write (it was edited since)"
            if there
            else "it is gone (removed since podstate wrote it)"
        )
        + f", and the file it held before podstate wrote it is kept at {copy}: podstate "
        "neither puts that back over it nor removes it; move it where it belongs (or remove "
        f"it), and the next {'uninstall' if uninstall else 'apply'} forgets it",
        "removal.saved",
    )
    return entry


def _proved(entry: Entry, probe: Probe) -> bool:
    """Return whether what is at ``entry``'s path holds what podstate wrote there, as the
    probe found on the pod (scripts/made_proof.sh); else it is named as left. A directory
    that is not a scratch directory has nothing to prove: it goes only when empty."""
    if (isinstance(entry, DirEntry) and not entry.scratch) or made.same(entry, probe.made_found()):
        return True
    findings.left(entry.path, f"{entry.path} holds what podstate did not write: left as it is")
    return False


def _own(entry: Entry, probe: Probe) -> None:
    """Plan removing podstate's own things that ``entry`` names (a directory podstate made,
    the secrets file, the archived host keys, the boot hook's data), when they are there
    and hold what podstate wrote (``_proved``; the step proves it again on the pod)."""
    path, there = entry.path, made.kind(entry.path, probe.made_found(), probe.paths)
    if there is None or (isinstance(entry, DirEntry) and there != "directory"):
        return
    if _proved(entry, probe):
        scratch = isinstance(entry, DirEntry) and entry.scratch  # the venv's caches in it
        ops.remove_own(name=f"Remove {path}", kind=entry.kind, path=path, scratch=scratch)


def usable(probe: Probe) -> bool:
    """Return whether podstate may act on the records the probe read; a violation says why
    for each it may not (unreadable, not a record, from a newer podstate, another pod's)."""
    problems = record_id.trusted(probe.made_found())
    for where, problem in problems.items():
        findings.violation(
            f"the record of what podstate made on this pod ({where}) cannot be used: "
            f"{problem}; podstate removes nothing here, and never guesses: move it away "
            "once what it names is checked by hand",
            "removal.record",
        )
    return not problems


def _package(entry: Entry, probe: Probe, *, uninstall: bool, remove: bool) -> Entry | None:
    """Plan removing the apt package podstate installed, with ``remove``; else it is left
    in place, and named once."""
    package = entry.path.removeprefix("apt:")
    if probe.made_found().kinds.get(entry.path) != "installed":
        return None
    if remove:
        ops.remove_package(
            name=f"Remove the apt package {package}",
            package=package,
            what=f"would remove: the apt package {package}",
        )
    elif uninstall:
        findings.left(entry.path, f"the apt package {package} (--packages removes it)")
    else:
        findings.left(
            entry.path,
            f"the apt package {package}, which podstate installed, is left in place "
            "(packages: {remove_undeclared: true} removes it)",
        )
    return None


def _venv(entry: Entry, probe: Probe, *, keep: bool, uninstall: bool) -> Entry | None:
    """Plan removing the venv podstate built, or its snapshots (neither with ``keep``); a
    venv that a process runs from, or may (one podstate cannot read), stays: a violation
    names the processes, and the record keeps it (``uninstall``: the run is an uninstall).
    Return what the record names afterwards."""
    path, there = entry.path, made.kind(entry.path, probe.made_found(), probe.paths)
    if keep or there is None:
        if keep and there is not None:
            findings.left(path, f"{path} (--keep-venv)")
        return None
    if isinstance(entry, VenvEntry):
        if there != "symbolic link":
            findings.left(path, f"{path} is no longer podstate's venv link: left as it is")
            return None
        if busy := probe.made_found().busy.get(path):
            findings.violation(
                f"the venv {path} is {'to go' if uninstall else 'no longer declared'}, but "
                f"{made.using(busy, 'runs from')}: podstate does not remove a venv in use (its "
                "interpreter and libraries would vanish from under them); stop them, and the "
                f"next {'uninstall' if uninstall else 'apply'} removes it",
                "removal.busy",
            )
            return entry
        ops.remove_venv(
            name=f"Remove the venv {path}", path=path, what=f"would remove: the venv {path}"
        )
        return None
    if _proved(entry, probe):
        ops.remove_own(name=f"Remove the venv snapshots in {path}", kind="snapshot", path=path)
    return None


@role("Removal", reads)
def apply(wanted: State, probe: Probe) -> None:
    """Take away what the records name and this run does not make; write the records."""
    found = probe.made
    if found is None or not usable(probe):
        return
    old = made.previous(found)
    new = dict(findings.of(host).made)
    after: dict[str, Entry] = {}
    packages = wanted.packages is not None and wanted.packages.remove_undeclared
    pod_id, where = record_id.own_id(found), boot.volume(wanted)
    records = record_id.record_paths(pod_id, where.volume)
    # what stays mounted: all there is, and what this run mounts, but what it unmounts
    mounted = {m.target for m in probe.mounts} | {p for p, e in new.items() if e.kind == "mount"}
    for path, entry in sorted(old.items(), reverse=True):  # what is in a directory first
        if path in new:  # made again; but a tmpfs goes where a directory is declared (dirs)
            if not isinstance(entry, MountEntry) or isinstance(new[path], MountEntry):
                continue
            entry = MountEntry(path, False)  # its mount point stays
        with pyinfra_plan.keyed(host, path):
            kept = undo(
                entry,
                probe,
                uninstall=False,
                packages=packages,
                records=records,
                volume=where.volume,
                staying=mounted,
            )
        if kept is not None:
            after[path] = kept
        elif (
            isinstance(entry, MountEntry)
            and path not in mounted  # unmounted by this run (a mount of another's stays)
            and (mount_point := _remake_below(entry, probe, new, wanted))
        ):
            after[path] = mount_point
    after.update(new)
    record_ops.plan(probe, pod_id, after, where.volume, volume=boot.has_volume(probe, where))


def _remake_below(
    entry: MountEntry, probe: Probe, new: dict[str, Entry], wanted: State
) -> Entry | None:
    """Plan making again the directories this run declares below the tmpfs at ``entry.path``
    (``dirs``, and those above them: ``new``), which its unmount takes away with it; return
    the record's entry for the mount point that then holds them, where podstate made it
    (None: nothing below, no unmount, or not podstate's)."""
    path = entry.path
    below: dict[str, str | None] = {
        p: None
        for p, e in new.items()
        if isinstance(e, DirEntry)
        and (p == path or p.startswith(f"{path}/"))
        and p in probe.paths  # the probe read
    }
    if not below or probe.made_found().kinds.get(path) != "mount":
        return None
    for name, directory in (wanted.dirs or {}).items():
        if directory in below:
            below[directory] = STICKY.get(name)
    bookkeeping.directories(
        name=f"Directories below {path}, after its unmount",
        paths=below,
        found=probe.paths,
        hidden=[path],
    )
    return DirEntry(path) if entry.made else None
