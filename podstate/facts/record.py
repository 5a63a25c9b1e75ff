"""A record of what podstate made, as the probe reads it (podstate.facts.made): its entries,
the record itself, and the probe's ``made`` section that holds both records and what is at
the paths they name."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from podstate.shell import b64


@dataclass(frozen=True)
class Entry:
    """One thing podstate made or edited: its kind, its path and its fields (the kinds and
    their fields: podstate.facts.made.KINDS)."""

    kind: str
    path: str
    fields: tuple[str, ...] = ()

    def line(self) -> str:
        """Return the entry as a line of the record."""
        return " ".join([self.kind, word(self.path), *self.fields]) + "\n"

    @property
    def sums(self) -> tuple[str, ...]:
        """Return the sha256 sums of what podstate wrote at the path (none for most kinds)."""
        if self.kind in ("file", "saved", "hook", "stub") and self.fields:
            return tuple(s for s in self.fields[0].split(",") if s and s != "-")
        return ()  # "-": the probe's copy of a record, whose sums stay on the pod


@dataclass
class Record:
    """A record as the probe read it: ``state`` (absent, unreadable, file, or noid: the
    pod has no id that names its volume record), the pod it names (``pod``, ``pod_id``),
    its entries by path, and ``problem``: why podstate must not act on it (unreadable, not
    a record, from a newer podstate), None when it can."""

    state: str
    pod: str | None = None
    pod_id: str | None = None
    entries: dict[str, Entry] = field(default_factory=dict)
    problem: str | None = None
    text: str | None = None  # the record as the probe read it (without its sums)
    dups: set[str] = field(default_factory=set)  # paths with more than one line


@dataclass(frozen=True)
class Busy:
    """A process that uses a mount or runs from a venv podstate made."""

    pid: int
    command: str
    unread: bool  # its files cannot be read (another user's): it may use it


@dataclass(frozen=True)
class Made:
    """The probe's ``made`` section: the records and what is at each path they name."""

    pod_id: str | None  # the pod's id (its provider's identity, else its record's); None: none
    records: dict[str, Record] = field(default_factory=dict)  # "disk", "volume": a Record each
    # the paths they name that another pod's record on the volume names too
    others: frozenset[str] = frozenset()
    # path -> whether the regular file there holds one of the contents its entry names
    same: dict[str, bool] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)  # path -> what is there, content unread
    busy: dict[str, tuple[Busy, ...]] = field(default_factory=dict)  # mount or venv -> users
    # checkout -> what of someone's own is in it, in words (scripts/repo_clean.sh)
    work: dict[str, str] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)  # tmpfs -> a file in it; "?": unreadable


_PLAIN = re.compile(r"[A-Za-z0-9/._+,:~=-]+")


def word(text: str) -> str:
    """Return ``text`` as one word of a record, as the probe's ``enc`` sends a value: ``=``
    and the text where it is plain (no program is needed to read it back), else base64."""
    return "=" + text if _PLAIN.fullmatch(text) else b64(text)
