"""The probe's record section: what podstate made and edited on the pod, as its records say,
and what is at each path they name now.

podstate keeps two records, each where its subject lives: one on the container disk
(``paths.MADE``, wiped with what it lists) and one on the volume, named for the pod's id
(``<volume>/.podstate/made/<name>``, ``record_id.record_name``, so a volume shared by two
pods keeps each pod's apart). The pod's id is its provider's identity (podstate.facts.boot),
else the one the container disk's record names, else one podstate makes
(``record_id.new_id``) and writes into the container disk's record. A container disk's
record that names another id than the provider's is a copy of another pod's (an image
baked from it): nothing it names is this pod's (``record_id.copied``).
Both records are root-only, line-based text (``render``), bound to the pod they were written
for (its name and id), and never hold a secret value: a file podstate wrote is named with
the sha256 of what it wrote, except the secrets file, named alone. The probe reads the
records (scripts/made_state.sh) and, in the same command, every path they name: a file's
content (a ``file`` line, for the files section), and whether it still holds what podstate
wrote (``made.same``: compared on the pod, so no digest is in the probe's output); and which
of the paths they name another pod's record on the volume names too (``others``: a pod
sharing the volume made it as well, and this pod must not remove it).
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from podstate.desired.state import State
from podstate.facts import record_id
from podstate.facts.boot import identity, identity_line
from podstate.facts.decode import decode
from podstate.facts.files import PathInfo
from podstate.facts.record import ENTRIES, BlockEntry, Busy, Entry, Made, Record, parse_entry, word
from podstate.limits import MAX_FILE
from podstate.paths import MADE
from podstate.shell import b64, quote_path, script

FORMAT = "podstate-made"
VERSION = 1
# What an entry is (the fields after its path):
#   file SUMS           a file podstate created (SUMS: the sha256 of each content it wrote,
#                       comma-separated); removed while it holds one of them
#   saved SUMS COPY [MODE OWNER]
#                       a file that was there before podstate wrote it; the user's file is
#                       kept at COPY, and put back while the file holds one of SUMS, with
#                       the MODE and OWNER (UID:GID) it had (a record without them: with
#                       the file's mode and owner then)
#   found               a file that held the declared content, with its mode, before podstate
#                       wrote anything there: the user's; forgotten, never removed
#   block BEGIN END     podstate's block (between lines starting with BEGIN and END, base64)
#                       in the user's file; taken out, the rest of the file untouched
#   hook SUMS           the boot hook; an apply disarms it (a stub), uninstall removes it
#   stub SUMS           the disarmed boot hook; only uninstall removes it
#   secrets             the secrets file (podstate's own path; no sum: nothing about a value)
#   keys                the archived host keys (hostkeys.tar, and hostkeys.sum beside it)
#   data                the boot hook's data directory (its files, then the directory)
#                       (these three only at their own places: record_lines.places;
#                       they, a snapshot and a scratch directory's caches are removed while
#                       the marks podstate's writes leave in them hold: scripts/made_proof.sh)
#   dir [scratch]       a directory podstate created; removed only when empty (a scratch
#                       directory once podstate's caches in it, .podstate-cache, are gone)
#   apt                 a Debian package podstate installed (path ``apt:NAME``), which was not
#                       installed before; removed only when the desired state says so
#   repo [emptied]      a checkout podstate cloned (into an empty directory, with
#                       ``emptied``); removed only while nothing of anyone's own is in it
#   venv                the venv's link and the versioned directories beside it; removed
#                       unless a process runs from it
#   snapshot            the venv's snapshots (archives and ``current``) in their directory
#   mount [made]        a tmpfs podstate mounted (and its mount point, with ``made``);
#                       unmounted unless a process has a file on it
KINDS = tuple(ENTRIES)  # one class each: podstate.facts.record


@dataclass(frozen=True)
class MadeRequest:
    """What the records' section reads (``Request.made``): as ``request`` and ``at`` ask it."""

    volume: str  # the volume's mount point, whose record the probe reads beside the disk's
    identity: tuple[str, ...]  # the variables that name the pod (podstate.facts.boot)
    keep: tuple[str, ...]  # the mounts, repositories and venv the desired state keeps


def sent(asked: MadeRequest | None) -> dict[str, Any] | None:
    """Return the probe's ``made`` argument for ``asked`` (``probe_lines``' ``args``), the plain
    dict pyinfra's fact is called with."""
    if asked is None:
        return None
    return {"volume": asked.volume, "identity": asked.identity, "keep": asked.keep}


def request(wanted: State) -> MadeRequest:
    """Return what the records' section reads for ``wanted``: where the volume is (boot.volume,
    ``/workspace`` by default), whose record the probe reads beside the container disk's; the
    variables that name the pod (``identity``: its provider's, podstate.facts.boot); and
    the scratch paths, repositories and venv it keeps (``keep``: whether a process uses them,
    or someone's work is in them, does not matter, and the probe does not look)."""
    return at(
        wanted.volume,
        (
            *wanted.scratch_paths,
            *(wanted.repos or {}),
            *((wanted.venv.path,) if wanted.venv else ()),
        ),
    )


def at(volume: str, keep: tuple[str, ...] = ()) -> MadeRequest:
    """Return what the records' section reads for the volume at ``volume``, keeping ``keep``
    (``request``'s, for what a desired state keeps; none, for ``podstate uninstall``)."""
    return MadeRequest(volume, identity(), keep)


def using(busy: Sequence[Busy], verb: str) -> str:
    """Return the processes ``busy`` (``parse``'s) in words, as a violation names them, with
    ``verb`` (``uses``, ``runs from``): those that do, and those podstate cannot read, which
    may (``python (pid 12) still runs from it; podstate cannot read what sleep (pid 13) runs
    from ...``)."""
    parts = []
    for unread in (False, True):
        these = [p for p in busy if p.unread is unread]
        if not these:
            continue
        who = ", ".join(f"{p.command} (pid {p.pid})" for p in these)
        first, _, rest = verb.partition(" ")
        how = " ".join([first if len(these) == 1 else first[:-1], rest]).strip()
        parts.append(
            f"podstate cannot read what {who} {how} (another user's: root has no "
            "CAP_SYS_PTRACE here)"
            if unread
            else f"{who} still {how} it"
        )
    return "; ".join(parts)


def previous(found: Made | None) -> dict[str, Entry]:
    """Return the entries of the records the probe read (``found``: its ``made``), by path;
    none from a record podstate cannot act on, nor from a copy of another pod's."""
    entries: dict[str, Entry] = {}
    if found is None:
        return entries
    for where, record in found.records.items():
        if record.problem is None and not (where == "disk" and record_id.copied(found)):
            entries.update(record.entries)
    return entries


def sums(*texts: str) -> str:
    """Return an entry's SUMS field for a file that held each of ``texts``: their sha256."""
    found = (hashlib.sha256(t.encode("utf-8", "surrogateescape")).hexdigest() for t in texts)
    return ",".join(dict.fromkeys(found))


def block(path: str, begin: str, end: str, was: Entry | None, *, absent: bool) -> BlockEntry:
    """Return the ``block`` entry of podstate's block at ``path``: its marks, and
    ``created`` when podstate made the file for it (``absent`` now, or so an earlier record
    says: ``was``)."""
    created = absent or (isinstance(was, BlockEntry) and was.created)
    return BlockEntry(path, b64(begin), b64(end), created)


def ancestors(path: str) -> list[str]:
    """Return the directories above ``path`` (not ``/`` nor ``~``), nearest first: those
    that are missing, podstate makes (and records, to remove them once empty)."""
    found = []
    while (path := posixpath.dirname(path)) not in ("/", "~", ""):
        found.append(path)
    return found


def same(entry: Entry, found: Made) -> bool:
    """Return whether ``entry``'s path holds one of the contents podstate wrote there, as
    compared on the pod (the sums never leave it; ``found``: the probe's ``made``)."""
    return bool(found.same.get(entry.path))


def kind(path: str, found: Made, paths: dict[str, PathInfo]) -> str | None:
    """Return what is at a recorded ``path`` that is not a file podstate wrote: as the
    records' section read it (``found``: the probe's ``made``), or the paths' section
    (``paths``; None: nothing)."""
    info = paths.get(path)
    return found.kinds.get(path) or (info.kind if info else None)


def render(pod: str, pod_id: str | None, entries: list[Entry]) -> str:
    """Return a record: its format and version, the pod it is for (name and id, "-" when
    unknown), then each entry, by path; every word of it is plain (``word``)."""
    head = f"{FORMAT} {VERSION}\npod {word(pod)} {word(pod_id) if pod_id else '-'}\n"
    return head + "".join(e.line() for e in sorted(entries, key=lambda e: (e.path, e.kind)))


def parse_record(text: str) -> Record:
    """Return the record ``text`` holds; one that is not a record, or is from a newer
    podstate, has its ``problem`` said and no entry (podstate never guesses)."""
    lines = text.split("\n")
    head = lines[0].split(" ")
    if len(head) != 2 or head[0] != FORMAT or not head[1].isdigit():
        return Record("file", problem="it is not a podstate record")
    if int(head[1]) > VERSION:
        return Record("file", problem=f"it is from a newer podstate (version {head[1]})")
    pod = lines[1].split(" ") if len(lines) > 1 else []
    if len(pod) != 3 or pod[0] != "pod":
        return Record("file", problem="it names no pod")
    try:
        name, pod_id = decode(pod[1]), None if pod[2] == "-" else decode(pod[2])
    except ValueError:
        return Record("file", problem="it names no pod")
    record = Record("file", pod=name, pod_id=pod_id)
    for line in lines[2:]:
        if not line:
            continue
        kind, *rest = line.split(" ")
        if kind not in KINDS or not rest:
            return Record("file", problem=f"it has an entry podstate cannot read ({kind})")
        try:
            path = decode(rest[0])
        except ValueError:
            return Record("file", problem="it has a path podstate cannot read")
        entry = parse_entry(kind, path, tuple(rest[1:]))
        if entry is None:
            return Record("file", problem=f"it has an entry podstate cannot read ({kind})")
        if path in record.entries:
            record.dups.add(path)  # a first write's line beside the last's: both hold
        record.entries[path] = entry
    return record


def probe_lines(args: dict[str, Any] | None, asked: Sequence[str] = ()) -> list[str]:
    """Return the probe's lines for the records (read-only): the container disk's record and
    what is at the paths it names (scripts/made_state.sh), ``made.pod_id`` (the container's
    identity, ``identity_line``, where it names a record, else the id that record names), the
    volume's record for that id (``record_id.name_line``), then which of their paths another
    record on the volume names (scripts/made_others.sh); ``args``: ``volume``, the volume's
    mount point, ``identity``, the variables that name the pod, and ``keep``, the mounts,
    repositories and venv the desired state keeps; ``asked``: the files and paths the probe
    reads anyway, which the records' section does not read again (``same`` and ``kind`` then
    tell from what the probe read)."""
    if not args:
        return []
    volume = quote_path(posixpath.join(args["volume"], ".podstate", "made"))
    keep = " ".join(word(path) for path in args.get("keep") or ())
    return [
        f"made_keep='{keep}' made_asked='{' '.join(word(path) for path in asked)}'",
        script("stats.sh"),
        script("file_state.sh"),
        script("repo_clean.sh"),
        script("busy.sh"),
        script("made_proof.sh"),
        script("made_state.sh"),
        script("made_others.sh"),
        f"made_id=; made_state disk {quote_path(MADE)} {MAX_FILE}",
        # The pod's id: its provider's identity where it names a record, which wins over
        # the id the container disk's record names (a disk copied from another pod names
        # that pod's); else that record's id (one podstate made).
        f"{identity_line(tuple(args['identity']))}; {record_id.name_line()}"
        '; if [ -z "$made_name" ]; then i=; case $made_id in =?*) i=${made_id#=} ;; esac; fi;'
        ' if [ -n "$i" ]; then enc "$i"; echo "made.pod_id $enc_v"; fi',
        record_id.name_line(),
        'if [ -z "$made_name" ]; then echo "made.record volume noid";'
        f' else made_state volume {volume}/"$made_name" {MAX_FILE}; fi',
        "made_same_end",
        f'made_others {volume} "$made_name"',
    ]


def parse(output: list[str]) -> Made:
    """Return the probe's :class:`Made` from its ``made.*`` lines."""
    pod_id: str | None = None
    records: dict[str, Record] = {}
    others: set[str] = set()
    same: dict[str, bool] = {}
    kinds: dict[str, str] = {}
    busy: dict[str, list[Busy]] = {}
    work: dict[str, str] = {}
    held: dict[str, str] = {}
    lines: dict[str, list[str]] = {}
    for line in output:
        key, _, rest = line.partition(" ")
        words = rest.split(" ")
        if key == "made.pod_id":
            pod_id = decode(words[0]).strip() or None
        elif key == "made.record":
            where, state = words[0], words[1]
            problem = "podstate cannot read it" if state == "unreadable" else None
            records[where] = Record(state, problem=problem)
            lines[where] = []
        elif key == "made.line":
            lines[words[0]].append(rest.partition(" ")[2])
        elif key == "made.same":  # one per line of the entry: any of them may hold
            path = decode(words[0])
            same[path] = same.get(path, False) or words[1] == "yes"
        elif key == "made.work":  # a checkout's work of someone's own, in words
            work[decode(words[0])] = " ".join(words[1:])
        elif key == "made.held":  # a file in a tmpfs podstate mounted; "?": unreadable
            held[decode(words[0])] = decode(words[1])
        elif key == "made.other":
            others.add(decode(words[0]))
        elif key == "made.busy":
            process = Busy(int(words[1]), decode(words[2]), words[3:] == ["unread"])
            busy.setdefault(decode(words[0]), []).append(process)
        elif key == "made.kind":
            kinds[decode(words[0])] = " ".join(words[1:])
    for where, text in lines.items():
        if records[where].state == "file":
            record = parse_record("".join(line + "\n" for line in text))
            record.text = "".join(line + "\n" for line in text)
            records[where] = record
    return Made(
        pod_id=pod_id,
        records=records,
        others=frozenset(others),
        same=same,
        kinds=kinds,
        busy={path: tuple(users) for path, users in busy.items()},
        work=work,
        held=held,
    )
