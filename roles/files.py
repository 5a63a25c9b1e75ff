"""Files: each ``files`` path holds its content with its mode, written atomically."""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import replace

from pyinfra import host

from podstate.desired.state import State
from podstate.facts import made
from podstate.facts.files import FileInfo
from podstate.facts.probe import Probe
from podstate.facts.record import DirEntry, Entry, FileEntry, FoundEntry, SavedEntry
from podstate.facts.request import Request
from podstate.paths import SAVED
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run import bookkeeping, findings
from podstate.run.role import role
from podstate.shell import b64


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: every ``files`` path, and the records of
    what podstate made (a file there before podstate wrote it is the user's, kept)."""
    if not wanted.files:
        return Request()
    parents = tuple(dict.fromkeys(p for path in wanted.files for p in made.ancestors(path)))
    return Request(files=tuple(wanted.files), paths=parents, made=made.request(wanted))


def copy_of(path: str) -> str:
    """Return where podstate keeps the user's file at ``path`` while its own is there."""
    return posixpath.join(
        SAVED, hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()
    )


@role("Files", reads, when=lambda wanted: wanted.files)
def apply(wanted: State, probe: Probe) -> None:
    """Write each file whose content or mode differs; anything else at its path (a
    directory, a link, a file too large to read) is a violation and nothing is written."""
    old = made.previous(probe.made)
    for path, item in (wanted.files or {}).items():
        name = f"File {path}"
        found = probe.files[path]
        was = old.get(path)
        saving = was is None or isinstance(was, FoundEntry)  # the file there is the user's
        with pyinfra_plan.keyed(host, name):
            entry = _entry(path, item.content, item.mode, found, was)
            if isinstance(entry, SavedEntry) and saving:
                bookkeeping.managed_file(
                    name=f"Keep the user's {path}",
                    path=copy_of(path),
                    content=found.content or "",
                    found=FileInfo("absent"),
                    own=True,
                    mode="600",
                )
            bookkeeping.owned_file(name, path, item.content, probe, item.mode)
        findings.restorable(path, item.content, item.mode)
        if isinstance(entry, SavedEntry):  # the hook puts the user's file back beside ours
            kept = found if saving else probe.files.get(copy_of(path))
            if kept is not None and kept.content is not None:
                findings.restorable(copy_of(path), kept.content, "600")
        findings.made(entry)
        made_directories(path, probe, old)


def made_directories(path: str, probe: Probe, old: dict[str, Entry]) -> None:
    """Record the directories above ``path`` that podstate makes to write it (missing), or
    made before (a directory, so ``old`` says); one another role recorded in this run (a
    scratch tmpfs, say) is that role's."""
    for directory in made.ancestors(path):
        was = old.get(directory)
        if findings.of(host).makes(directory):
            continue
        if probe.paths[directory].kind is None:
            findings.made(DirEntry(directory))
        elif isinstance(was, DirEntry):
            findings.made(was)


def _entry(path: str, content: str, mode: str, found: FileInfo, was: Entry | None) -> Entry:
    """Return the record's entry for the ``files`` path: ``saved`` (with the copy of the
    user's file, its mode and owner) where a file of other content or mode was there before
    podstate wrote it; ``found`` where the user's file holds ``content`` with ``mode``
    already (podstate writes nothing, and never removes it); else ``file``. A file once
    found is still the user's: the next run decides on it afresh."""
    sums = made.sums(content)
    if isinstance(was, SavedEntry):
        return replace(was, written=sums)
    if (was is None or isinstance(was, FoundEntry)) and found.state == "file":
        if found.content == content and found.mode == mode:
            return FoundEntry(path)
        if found.content is not None:
            owned = (found.mode, found.owner) if found.mode and found.owner else (None, None)
            return SavedEntry(path, sums, b64(copy_of(path)), *owned)
    return FileEntry(path, sums)
