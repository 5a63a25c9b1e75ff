"""The records of what podstate made (podstate.facts.made): their writes, each in one rename
and proved on the pod, and the plan of both writes an apply or uninstall makes of them.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Generator

from pyinfra import host, state
from pyinfra.api import operation

from podstate.facts import made, record_id
from podstate.facts.probe import Probe
from podstate.facts.record import Entry, FoundEntry, Made
from podstate.paths import MADE
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run import findings
from podstate.run.lock import Change, changing
from podstate.run.words import content_word, plain
from podstate.shell import b64, quote_path


def record_command(
    path: str, content: str, *, private: bool, append: bool, head: str | None
) -> str:
    """Return sh that writes a record (``write_record``, whose arguments these are) in one
    rename, and proves it: short, since the apply's one command holds every change, and
    starting no program but the rename where it can (the fold proves a whole record with its
    other writes: scripts/fold_proof.sh; a directory there already is not made again)."""
    directory, q = quote_path(path.rsplit("/", 1)[0]), quote_path(path)
    make = (  # -m sets the mode of a directory it makes alone: chmod tightens one there
        f"{{ [ -d {directory} ] || {{ mkdir -p -m 700 -- {directory} &&"
        f" {{ [ -L {directory} ] || chmod 700 -- {directory}; }}; }}; }}"
        if private
        else f"{{ [ -d {directory} ] || mkdir -p -- {directory}; }}"
    )
    if not append:
        sums = made.sums(content)
        return (
            f"{make} && (umask 077 && w={content_word(content)} && case $w in =*) printf %s"
            f' "${{w#=}}" ;; *) printf %s "$w" | base64 -d ;; esac >{q}.part) &&'
            f" mv -f -- {q}.part {q} && {{ podstate_later {q} {sums} - 2>/dev/null ||"
            f' [ "$(sha256sum <{q})" = "{sums}  -" ]; }}'
        )
    if not plain(content + (head or "")):  # bytes a shell word cannot hold: decoded
        old = (
            f"cat -- {q}"
            if head is None
            else f"printf %s {b64(head)} | base64 -d && tail -n +3 -- {q}"
        )
        return (
            f"{make} && (umask 077 && {{ {old} && printf %s {b64(content)} | base64 -d;"
            f' }} >{q}.part) && mv -f -- {q}.part {q} && [ "$(tail -c {len(content.encode())}'
            f' -- {q} | sha256sum)" = "{made.sums(content)}  -" ]'
        )
    # the record as it is (or with ``head`` for its first two lines), then the lines, read
    # and written by the shell: proved by reading it back whole
    nl, skip = "nl='\n'", 2 if head is not None else 0
    return (
        f'{make} && {{ {nl}; r={shlex.quote(head or "")} n=0; while IFS= read -r l || [ -n "$l" ];'
        f' do n=$((n + 1)); [ "$n" -le {skip} ] || r="$r$l$nl"; done <{q}; }} &&'
        f' r="$r"{shlex.quote(content)} && (umask 077 && printf %s "$r" >{q}.part) &&'
        f" mv -f -- {q}.part {q} && {{ b=''; while IFS= read -r l; do b=\"$b$l$nl\"; done"
        f' <{q}; [ "$b" = "$r" ]; }}'
    )


@operation()
def write_record(
    path: str,
    content: str,
    current: str | None,
    *,
    private: bool,
    what: str | None = None,
    append: bool = False,
    head: str | None = None,
) -> Generator[Change, None, None]:
    """
    Write a record of what podstate made (podstate.facts.made), root-only, in one rename.

    + path: the record
    + content: the record to write
    + current: the record the probe read (None: none)
    + private: the record's directory holds records alone, and is made root-only
    + what: what the write changes, in words, where the check reports it (None: it does not)
    + append: ``content`` is lines added to the record on the pod (whose sums podstate does
      not know: they never leave the pod), not the whole record
    + head: with ``append``, the record's first two lines (its format and the pod it is
      for) become these (None: they stay)
    """
    if what:
        findings.describe(what)
    if current == content or (append and not content and head is None):
        host.noop(f"{path} is up to date")
        return
    command = record_command(path, content, private=private, append=append, head=head)
    yield changing(command, later=True)


@operation()
def tighten(path: str, mode: str) -> Generator[Change, None, None]:
    """
    Make the records' folder on the volume root-only again (mode 700) where it is not: any
    user of a pod sharing the volume could otherwise write a record there.

    + path: the folder
    + mode: its mode, as the probe read it
    """
    findings.describe(
        f"would tighten: {path} to mode 700 (it is {mode}): the records in it are root's alone"
    )
    q = quote_path(path)
    yield changing(f'[ ! -L {q} ] && chmod 700 -- {q} && [ "$(stat -c %a -- {q})" = 700 ]')


def _on(path: str, volume: str) -> bool:
    return path == volume or path.startswith(volume.rstrip("/") + "/")


def _changed(entry: Entry, was: Entry | None, probe: Probe) -> bool:
    """Return whether the record's line for ``entry`` changes in this run (its sums, which
    never leave the pod, are compared through what the probe read): a new path or kind,
    other fields, or a file that does not hold, or will not hold, the content it names."""
    if was is None or was.kind != entry.kind:
        return True
    if not entry.sums:
        return was.fields != entry.fields
    info = probe.files.get(entry.path)
    content = info.content if info is not None and info.state == "file" else None
    return (
        was.fields[1:] != entry.fields[1:]
        or content is None
        or made.sums(content) not in entry.sums
        or not made.same(entry, probe.made_found())
    )


def plan(
    probe: Probe, pod_id: str, after: dict[str, Entry], at_volume: str, *, volume: bool
) -> None:
    """Plan the records' two writes, for the pod ``pod_id`` (``record_id.own_id``): first
    (before every other change: podstate.pod.bookends) the lines of what this run makes anew,
    added to the record on the pod (which keeps what was made, with the sums of what podstate
    wrote; its head names ``pod_id`` from then on); last, the whole record of what is made
    now, unless it would be the same. What is on the volume at ``at_volume``, when it is
    mounted (``volume``), goes in the volume's record, the rest in the container disk's.
    Neither is a change the check reports, unless the last forgets what now holds something
    else, or the first replaces a container disk's record copied from another pod
    (``record_id.copied``) with this pod's own."""
    found = probe.made_found()
    mine = findings.of(host)
    copy = record_id.copied(found)
    for name in ("disk", "volume") if volume else ("disk",):
        at = MADE if name == "disk" else record_id.volume_record(at_volume, pod_id)

        def here(entries: dict[str, Entry], name: str = name) -> dict[str, Entry]:
            on = name == "volume"
            return {p: e for p, e in entries.items() if (volume and _on(p, at_volume)) == on}

        if name == "volume":
            _tighten(probe, posixpath.dirname(at))
        record = found.records.get(name)
        copied = name == "disk" and copy is not None  # replaced by this pod's own
        if record is None or record.state != "file" or copied:
            record = None  # none on the pod, or one this pod's own replaces
        there = record is not None
        was, now = record.entries if record is not None else {}, here(after)
        if not there and not now and not copied:
            continue
        final = made.render(host.name, pod_id, list(now.values()))
        if name == "disk":  # the boot hook puts it back with what it names
            findings.restorable(at, final, "600", before=False)
        head = (
            made.render(host.name, pod_id, [])
            if record is not None and record.pod_id != pod_id
            else None
        )
        changed = [
            e
            for p, e in now.items()
            if (_changed(e, was.get(p), probe) if mine.makes(p) else e != was.get(p))
        ]  # what this run does not make is kept as the record has it, or the stub
        stale = bool(set(was) - set(now)) or bool(record and record.dups) or head is not None
        first = "".join(e.line() for e in changed) if there else final
        label, private = f"Record of what podstate made ({name})", name == "volume"
        with pyinfra_plan.keyed(host, name):
            before = pyinfra_plan.op_hashes(state, host)
            write_record(
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
            write_record(
                name=f"{label}, after",
                path=at,
                content=final,
                current=None,
                private=private,
                what=what,
            )
            if not left:
                mine.bookkeeping |= pyinfra_plan.op_hashes(state, host) - before


def _tighten(probe: Probe, folder: str) -> None:
    """Plan making the volume's records' ``folder`` root-only (mode 700) where the probe
    found it a directory of another mode: made looser by hand, or by another program."""
    info = probe.paths.get(folder)
    if info is not None and info.kind == "directory" and info.mode not in (None, "700"):
        with pyinfra_plan.keyed(host, folder):
            tighten(name=f"Tighten {folder}", path=folder, mode=info.mode)


def _unnamed(path: str, found: Made, here: Callable[[dict[str, Entry]], dict[str, Entry]]) -> bool:
    """Return whether ``path``, which no record the probe read names, belongs in the record
    ``here`` keeps the entries of (by where it is): a path a record names is forgotten, and
    said so, with that record (a line podstate refused may name a path off its volume)."""
    named = (path in r.entries for r in found.records.values() if r.state == "file")
    return not any(named) and bool(here({path: FoundEntry(path)}))
