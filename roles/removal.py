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
from collections.abc import Callable
from typing import Any

from pyinfra import host, state

from podstate.facts import made, record_id, record_lines
from podstate.facts.boot import IDENTITY
from podstate.facts.decode import decode
from podstate.facts.made import Entry
from podstate.facts.request import Request
from podstate.operations import removal as ops
from podstate.paths import VOLUME
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.roles import boot
from podstate.roles.scratch import unmount
from podstate.run import bookkeeping, findings
from podstate.run.role import role

STUB = (
    "# podstate's boot hook, disarmed: it does nothing. The template's container start\n"
    "# command can drop the hook ('. <this file>;'); `podstate uninstall` removes this file.\n"
    ":\n"
)


def reads(wanted: dict[str, Any]) -> Request:
    """Return what the probe reads for this role: the records, what they name, and the
    volume's records' folder (its mode: ``_records`` tightens it)."""
    folder = posixpath.join(boot.volume(wanted).volume, ".podstate", "made")
    return Request(made=made.request(wanted), paths=(folder,))


def take_block(text: str, begin: str, end: str) -> str | None:
    """Return ``text`` without podstate's blocks: each run of lines from one starting with
    ``begin`` to one starting with ``end``, both included; every other line as it was. None
    when a ``begin`` line has no ``end`` line after it: which of the lines after it are
    podstate's cannot be told (in ~/.ssh/authorized_keys, the keys someone logs in with)."""
    kept, inside = [], False
    for line in text.splitlines(keepends=True):
        if not inside and line.startswith(begin):
            inside = True
        elif inside and line.startswith(end):
            inside = False
        elif not inside:
            kept.append(line)
    return None if inside else "".join(kept)


def _on(path: str, volume: str) -> bool:
    return path == volume or path.startswith(volume.rstrip("/") + "/")


def undo(
    entry: Entry,
    probe: dict[str, Any],
    uninstall: bool,
    packages: bool = False,
    keep_venv: bool = False,
    records: tuple[str, ...] = (),
    discard_scratch: bool = False,
    volume: str = VOLUME,
) -> Entry | None:
    """Plan taking ``entry`` away as the probe found it (apt packages only with
    ``packages``; the venv and its snapshot not with ``keep_venv``; ``records``: the records'
    paths on the pod, which a removal checks the file against; a tmpfs that holds files
    only with ``discard_scratch``; ``volume``: where the volume is); return what the record
    names afterwards (a disarmed boot hook's stub, what stays), None when nothing. A line
    podstate did not write (``record_lines.refused``) is named, and nothing removed."""
    path, files = entry.path, probe["files"]
    if entry.kind == "found":
        return None  # the user's file, which held what podstate would write: kept
    homes = tuple(boot.Layout(volume, provider).home for provider in IDENTITY)
    if why := record_lines.refused(entry, probe["made"], volume, homes):
        findings.left(path, f"{why}: not podstate's to remove; left as it is")
        return None
    if path in probe["made"]["others"]:
        findings.left(
            path,
            f"{path} is in another pod's record on the volume too (a pod sharing it made it "
            "as well): left as it is",
        )
        return None
    if entry.kind == "apt":
        return _package(entry, probe, uninstall, packages)
    if entry.kind in ("venv", "snapshot"):
        return _venv(entry, probe, keep_venv, uninstall)
    info = files.get(path)
    same = made.same(entry, probe)
    content = info.content if info is not None else None
    if entry.kind == "mount":
        return unmount(entry, probe, uninstall, discard_scratch)
    if entry.kind == "repo":
        if probe["made"]["kinds"].get(path) != "repo":
            return None
        if not probe["made"]["same"].get(path):
            work = probe["made"].get("work", {}).get(path) or "what git cannot read"
            findings.left(path, f"{path} has work of someone's own in it ({work}): left as it is")
            return None
        emptied = "emptied" in entry.fields
        what = f"would remove: the checkout {path}" + (", emptied" if emptied else "")
        ops.remove_checkout(name=f"Remove {path}", path=path, keep_directory=emptied, what=what)
        return None
    if entry.kind in ("secrets", "keys", "data", "dir"):
        _own(entry, probe)
        return None
    if entry.kind == "saved":
        return _put_back(entry, probe, uninstall)
    if info is None or info.state in ("absent", "dangling"):
        return None  # gone already
    if entry.kind == "block":
        begin, end = (decode(f) for f in entry.fields[:2])
        if content is None or begin not in content:
            return None
        rest = take_block(content, begin, end)
        if rest is None:
            findings.violation(
                f"podstate's block in {path} has lost its end mark ({end!r}): podstate cannot "
                "tell its lines from the ones after it, so it removes nothing there; put the end "
                "mark back after podstate's lines (or take them out, with the begin mark, by "
                "hand), and the next run finishes",
                "removal.block",
            )
            return entry
        gone = "created" in entry.fields[2:] and not rest.strip()
        ops.put_back(
            name=f"Take podstate's block out of {path}",
            path=path,
            current=content,
            content=None if gone else rest,
            what=f"would remove: podstate's block in {path}",
        )
        return None
    if not same:
        if entry.kind in ("hook", "stub") and content == STUB:
            return Entry("stub", path, (made.sums(STUB),))  # the hook is disarmed already
        findings.left(path, f"{path} holds what podstate did not write: left as it is")
        return None
    if entry.kind == "hook" and not uninstall:
        bookkeeping.managed_file(
            name=f"Disarm the boot hook {path}: a stub that does nothing; the template's "
            "container start command can drop it",
            path=path,
            content=STUB,
            found=info,
            own=True,
        )
        return Entry("stub", path, (made.sums(STUB),))
    if entry.kind == "stub" and not uninstall:
        return entry
    ops.remove_file(name=f"Remove {path}", path=path, content=content, records=records)
    return None


def _put_back(entry: Entry, probe: dict[str, Any], uninstall: bool) -> Entry | None:
    """Plan putting back the user's file that a ``saved`` entry names, as it was before
    podstate wrote over it: its content, and the mode and owner the record names (a record
    without them: the file keeps those it has). A file that no longer holds what podstate
    wrote, or is gone, is left as it is; while the copy of the user's file is there, a
    violation names it and where it is, and the record keeps the entry (forgotten, the copy
    would sit in a root-only directory that nothing names). Return what the record names
    afterwards."""
    path, files = entry.path, probe["files"]
    copy = decode(entry.fields[1])
    info, original = files.get(path), files.get(copy)
    kept = original is not None and original.state == "file" and original.content is not None
    there = info is not None and info.state not in ("absent", "dangling")
    if there and made.same(entry, probe):
        if not kept:
            findings.left(
                path, f"{path}: the copy of the user's file is gone ({copy}): left as it is"
            )
            return None
        mode, owner = entry.fields[2:4] if len(entry.fields) >= 4 else (None, None)
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


def _proved(entry: Entry, probe: dict[str, Any]) -> bool:
    """Return whether what is at ``entry``'s path holds what podstate wrote there, as the
    probe found on the pod (scripts/made_proof.sh); else it is named as left. A directory
    that is not a scratch directory has nothing to prove: it goes only when empty."""
    if (entry.kind == "dir" and "scratch" not in entry.fields) or made.same(entry, probe):
        return True
    findings.left(entry.path, f"{entry.path} holds what podstate did not write: left as it is")
    return False


def _own(entry: Entry, probe: dict[str, Any]) -> None:
    """Plan removing podstate's own things that ``entry`` names (a directory podstate made,
    the secrets file, the archived host keys, the boot hook's data), when they are there
    and hold what podstate wrote (``_proved``; the step proves it again on the pod)."""
    path, there = entry.path, made.kind(entry.path, probe)
    if there is None or (entry.kind == "dir" and there != "directory"):
        return
    if _proved(entry, probe):
        scratch = "scratch" in entry.fields  # with podstate's caches for the venv in it
        ops.remove_own(name=f"Remove {path}", kind=entry.kind, path=path, scratch=scratch)


def usable(probe: dict[str, Any]) -> bool:
    """Return whether podstate may act on the records the probe read; a violation says why
    for each it may not (unreadable, not a record, from a newer podstate, another pod's)."""
    problems = record_id.trusted(probe["made"])
    for where, problem in problems.items():
        findings.violation(
            f"the record of what podstate made on this pod ({where}) cannot be used: "
            f"{problem}; podstate removes nothing here, and never guesses: move it away "
            "once what it names is checked by hand",
            "removal.record",
        )
    return not problems


def _package(entry: Entry, probe: dict[str, Any], uninstall: bool, remove: bool) -> Entry | None:
    """Plan removing the apt package podstate installed, with ``remove``; else it is left
    in place, and named once."""
    package = entry.path.removeprefix("apt:")
    if probe["made"]["kinds"].get(entry.path) != "installed":
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


def _venv(entry: Entry, probe: dict[str, Any], keep: bool, uninstall: bool) -> Entry | None:
    """Plan removing the venv podstate built, or its snapshots (neither with ``keep``); a
    venv that a process runs from, or may (one podstate cannot read), stays: a violation
    names the processes, and the record keeps it (``uninstall``: the run is an uninstall).
    Return what the record names afterwards."""
    path, there = entry.path, made.kind(entry.path, probe)
    if keep or there is None:
        if keep and there is not None:
            findings.left(path, f"{path} (--keep-venv)")
        return None
    if entry.kind == "venv":
        if there != "symbolic link":
            findings.left(path, f"{path} is no longer podstate's venv link: left as it is")
            return None
        if busy := probe["made"]["busy"].get(path):
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


@role("Removal")
def apply(wanted: dict[str, Any], probe: dict[str, Any]) -> None:
    """Take away what the records name and this run does not make; write the records."""
    found = probe.get("made")
    if found is None or not usable(probe):
        return
    old = made.previous(found)
    new = dict(findings.of(host).made)
    after: dict[str, Entry] = {}
    packages = bool((wanted.get("packages") or {}).get("remove_undeclared"))
    pod_id, where = record_id.own_id(found), boot.volume(wanted)
    records = record_id.record_paths(pod_id, where.volume)
    for path, entry in sorted(old.items(), reverse=True):  # what is in a directory first
        if path in new:
            continue
        with pyinfra_plan.keyed(host, path):
            kept = undo(entry, probe, False, packages, records=records, volume=where.volume)
        if kept is not None:
            after[path] = kept
    after.update(new)
    _records(wanted, probe, pod_id, after)


def _changed(entry: Entry, was: Entry | None, probe: dict[str, Any]) -> bool:
    """Return whether the record's line for ``entry`` changes in this run (its sums, which
    never leave the pod, are compared through what the probe read): a new path or kind,
    other fields, or a file that does not hold, or will not hold, the content it names."""
    if was is None or was.kind != entry.kind:
        return True
    if not entry.sums:
        return was.fields != entry.fields
    info = probe["files"].get(entry.path)
    content = info.content if info is not None and info.state == "file" else None
    return (
        was.fields[1:] != entry.fields[1:]
        or content is None
        or made.sums(content) not in entry.sums
        or not made.same(entry, probe)
    )


def _records(
    wanted: dict[str, Any], probe: dict[str, Any], pod_id: str, after: dict[str, Entry]
) -> None:
    """Plan the records' two writes, for the pod ``pod_id`` (``record_id.own_id``): first
    (before every other change: podstate.pod.bookends) the lines of what this run makes anew,
    added to the record on the pod (which keeps what was made, with the sums of what podstate
    wrote; its head names ``pod_id`` from then on); last, the whole record of what is made
    now, unless it would be the same. What is on a mounted volume goes in the volume's
    record, the rest in the container disk's. Neither is a change the check reports, unless
    the last forgets what now holds something else, or the first replaces a container
    disk's record copied from another pod (``record_id.copied``) with this pod's own."""
    found, where = probe["made"], boot.volume(wanted)
    volume = boot.has_volume(probe, where)
    mine = findings.of(host)
    copy = record_id.copied(found)
    for name in ("disk", "volume") if volume else ("disk",):
        at = made.MADE if name == "disk" else record_id.volume_record(where.volume, pod_id)

        def here(entries: dict[str, Entry], name: str = name) -> dict[str, Entry]:
            on = name == "volume"
            return {p: e for p, e in entries.items() if (volume and _on(p, where.volume)) == on}

        if name == "volume":
            _tighten(probe, posixpath.dirname(at))
        record = found["records"].get(name)
        copied = name == "disk" and copy is not None  # replaced by this pod's own
        there = record is not None and record.state == "file" and not copied
        was, now = record.entries if there else {}, here(after)
        if not there and not now and not copied:
            continue
        final = made.render(host.name, pod_id, list(now.values()))
        if name == "disk":  # the boot hook puts it back with what it names
            findings.restorable(at, final, "600")
        head = made.render(host.name, pod_id, []) if there and record.pod_id != pod_id else None
        changed = [
            e
            for p, e in now.items()
            if (_changed(e, was.get(p), probe) if p in mine.made else e != was.get(p))
        ]  # what this run does not make is kept as the record has it, or the stub
        stale = bool(set(was) - set(now)) or bool(there and record.dups) or head is not None
        first = "".join(e.line() for e in changed) if there else final
        label, private = f"Record of what podstate made ({name})", name == "volume"
        with pyinfra_plan.keyed(host, name):
            before = pyinfra_plan.op_hashes(state, host)
            ops.write_record(
                name=label,
                path=at,
                content=first,
                current=None,
                private=private,
                what=f"would start this pod's own record: {record_id.copied_words(found)}"
                if copied
                else None,
                append=there,
                head=head,
            )
            added = pyinfra_plan.op_hashes(state, host) - before
            mine.first += sorted(added)
            if not copied:  # else a change the check reports, in words
                mine.bookkeeping |= added
            if not there or not (changed or stale):
                continue  # the first write is the whole record, or nothing changes
            before = pyinfra_plan.op_hashes(state, host)
            left = [m for p, m in mine.left.items() if p in was or _unnamed(p, found, here)]
            what = "; ".join(f"would forget: {m}" for m in left) if left else None
            ops.write_record(
                name=f"{label}, after",
                path=at,
                content=final,
                current=None,
                private=private,
                what=what,
            )
            if not left:
                mine.bookkeeping |= pyinfra_plan.op_hashes(state, host) - before


def _tighten(probe: dict[str, Any], folder: str) -> None:
    """Plan making the volume's records' ``folder`` root-only (mode 700) where the probe
    found it a directory of another mode: made looser by hand, or by another program."""
    info = probe["paths"].get(folder) or {}
    if info.get("kind") == "directory" and info.get("mode") not in (None, "700"):
        with pyinfra_plan.keyed(host, folder):
            ops.tighten(name=f"Tighten {folder}", path=folder, mode=info["mode"])


def _unnamed(
    path: str, found: dict[str, Any], here: Callable[[dict[str, Entry]], dict[str, Entry]]
) -> bool:
    """Return whether ``path``, which no record the probe read names, belongs in the record
    ``here`` keeps the entries of (by where it is): a path a record names is forgotten, and
    said so, with that record (a line podstate refused may name a path off its volume)."""
    named = (path in r.entries for r in found["records"].values() if r.state == "file")
    return not any(named) and bool(here({path: Entry("file", path)}))
