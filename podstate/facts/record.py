"""A record of what podstate made, as the probe reads it (podstate.facts.made): its entries,
the record itself, and the probe's ``made`` section that holds both records and what is at
the paths they name."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from podstate.facts.decode import decode
from podstate.shell import b64


@dataclass(frozen=True)
class Entry:
    """One thing podstate made or edited, at ``path``: a line of a record. Each kind is a
    class of its own (``ENTRIES``, whose fields podstate.facts.made.KINDS describes), made
    by ``parse_entry`` where a record line is read and written back by ``line``."""

    kind: ClassVar[str] = ""
    path: str

    @property
    def fields(self) -> tuple[str, ...]:
        """Return the words after the path, as the record writes them."""
        return ()

    def line(self) -> str:
        """Return the entry as a line of the record."""
        return " ".join([self.kind, word(self.path), *self.fields]) + "\n"

    @property
    def sums(self) -> tuple[str, ...]:
        """Return the sha256 sums of what podstate wrote at the path (none for most kinds)."""
        return ()

    @classmethod
    def parse(cls, path: str, words: tuple[str, ...]) -> Entry | None:
        """Return the entry of ``cls`` at ``path`` whose line has ``words`` after the path;
        None when they are not the words of this kind."""
        return None if words else cls(path)


@dataclass(frozen=True)
class Written(Entry):
    """A kind whose one field is SUMS: what podstate wrote there, each content's sha256,
    comma-separated ("-" in the probe's copy of a record, whose sums stay on the pod)."""

    written: str

    @property
    def fields(self) -> tuple[str, ...]:
        return (self.written,)

    @property
    def sums(self) -> tuple[str, ...]:
        return tuple(s for s in self.written.split(",") if s and s != "-")

    @classmethod
    def parse(cls, path: str, words: tuple[str, ...]) -> Entry | None:
        return cls(path, words[0]) if len(words) == 1 else None


@dataclass(frozen=True)
class Flagged(Entry):
    """A kind with one optional word after its path, ``FLAG``: set or not."""

    FLAG: ClassVar[str] = ""
    flag: bool = False

    @property
    def fields(self) -> tuple[str, ...]:
        return (self.FLAG,) if self.flag else ()

    @classmethod
    def parse(cls, path: str, words: tuple[str, ...]) -> Entry | None:
        return cls(path, bool(words)) if words in ((), (cls.FLAG,)) else None


@dataclass(frozen=True)
class FileEntry(Written):
    """A file podstate created; removed while it holds one of the contents it wrote."""

    kind: ClassVar[str] = "file"


@dataclass(frozen=True)
class HookEntry(Written):
    """The boot hook; an apply disarms it (a stub), uninstall removes it."""

    kind: ClassVar[str] = "hook"


@dataclass(frozen=True)
class StubEntry(Written):
    """The disarmed boot hook; only uninstall removes it."""

    kind: ClassVar[str] = "stub"


@dataclass(frozen=True)
class SavedEntry(Written):
    """A file that was there before podstate wrote it: the user's is kept at ``copy`` (its
    word in the record: ``copy_word``) and put back with its ``mode`` and ``owner``
    (UID:GID; None in a record without them: the file's own are kept then)."""

    kind: ClassVar[str] = "saved"
    copy_word: str
    mode: str | None = None
    owner: str | None = None

    @property
    def copy(self) -> str:
        """Return where the user's file is kept."""
        return decode(self.copy_word)

    @property
    def fields(self) -> tuple[str, ...]:
        owned = (self.mode, self.owner) if self.mode and self.owner else ()
        return (self.written, self.copy_word, *owned)

    @classmethod
    def parse(cls, path: str, words: tuple[str, ...]) -> Entry | None:
        if len(words) == 2:
            return cls(path, words[0], words[1])
        return cls(path, *words) if len(words) == 4 else None


@dataclass(frozen=True)
class FoundEntry(Entry):
    """A file that held the declared content and mode before podstate wrote anything
    there: the user's, forgotten, never removed."""

    kind: ClassVar[str] = "found"


@dataclass(frozen=True)
class BlockEntry(Entry):
    """podstate's block in the user's file, between lines starting with ``begin`` and
    ``end`` (base64 in the record: ``begin_word``, ``end_word``); ``created``: podstate made
    the file for it."""

    kind: ClassVar[str] = "block"
    begin_word: str
    end_word: str
    created: bool = False

    @property
    def marks(self) -> tuple[str, str]:
        """Return the block's begin and end marks."""
        return decode(self.begin_word), decode(self.end_word)

    @property
    def fields(self) -> tuple[str, ...]:
        return (self.begin_word, self.end_word, *(("created",) if self.created else ()))

    @classmethod
    def parse(cls, path: str, words: tuple[str, ...]) -> Entry | None:
        if len(words) == 2 or (len(words) == 3 and words[2] == "created"):
            return cls(path, words[0], words[1], len(words) == 3)
        return None


@dataclass(frozen=True)
class SecretsEntry(Entry):
    """The secrets file (no sum: nothing about a value)."""

    kind: ClassVar[str] = "secrets"


@dataclass(frozen=True)
class KeysEntry(Entry):
    """The archived host keys (hostkeys.tar, and hostkeys.sum beside it)."""

    kind: ClassVar[str] = "keys"


@dataclass(frozen=True)
class DataEntry(Entry):
    """The boot hook's data directory."""

    kind: ClassVar[str] = "data"


@dataclass(frozen=True)
class DirEntry(Flagged):
    """A directory podstate created, removed once empty; ``scratch``: a scratch directory,
    with podstate's caches for the venv in it."""

    kind: ClassVar[str] = "dir"
    FLAG: ClassVar[str] = "scratch"

    @property
    def scratch(self) -> bool:
        return self.flag


@dataclass(frozen=True)
class MountEntry(Flagged):
    """A tmpfs podstate mounted; ``made``: podstate made its mount point too."""

    kind: ClassVar[str] = "mount"
    FLAG: ClassVar[str] = "made"

    @property
    def made(self) -> bool:
        return self.flag


@dataclass(frozen=True)
class RepoEntry(Flagged):
    """A checkout podstate cloned; ``emptied``: into an empty directory, which stays."""

    kind: ClassVar[str] = "repo"
    FLAG: ClassVar[str] = "emptied"

    @property
    def emptied(self) -> bool:
        return self.flag


@dataclass(frozen=True)
class AptEntry(Entry):
    """A Debian package podstate installed (path ``apt:NAME``)."""

    kind: ClassVar[str] = "apt"


@dataclass(frozen=True)
class VenvEntry(Entry):
    """The venv's link and the versioned directories beside it."""

    kind: ClassVar[str] = "venv"


@dataclass(frozen=True)
class SnapshotEntry(Entry):
    """The venv's snapshots in their directory."""

    kind: ClassVar[str] = "snapshot"


ENTRIES: dict[str, type[Entry]] = {
    e.kind: e
    for e in (
        FileEntry,
        SavedEntry,
        FoundEntry,
        BlockEntry,
        HookEntry,
        StubEntry,
        SecretsEntry,
        KeysEntry,
        DataEntry,
        DirEntry,
        MountEntry,
        AptEntry,
        RepoEntry,
        VenvEntry,
        SnapshotEntry,
    )
}


def parse_entry(kind: str, path: str, words: tuple[str, ...]) -> Entry | None:
    """Return the entry a record's line names: its ``kind``, its ``path`` (decoded) and the
    ``words`` after it; None for a kind podstate does not know, or words not of its kind."""
    known = ENTRIES.get(kind)
    return None if known is None else known.parse(path, words)


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
