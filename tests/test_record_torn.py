"""A record line of every kind with a word missing, a word too many or a malformed word makes
the record unreadable, and reading it never raises; a line of its kind's words is read and
written back byte for byte. On the pod, made_state passes such lines on and reads the rest
under dash, bash and busybox sh (tests/conftest.py's ``shell``)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from podstate.facts.made import FORMAT, VERSION, parse_record
from podstate.facts.record import (
    ENTRIES,
    AptEntry,
    BlockEntry,
    DataEntry,
    DirEntry,
    Entry,
    FileEntry,
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
from tests.test_shell_units_made_state import made

HEAD = f"{FORMAT} {VERSION}\npod =p =id\n"
ONE_OF_EACH: list[Entry] = [
    FileEntry("/f", "s1,s2"),
    SavedEntry("/s", "s1", "=/copy"),
    SavedEntry("/t", "s1", "=/copy", "644", "0:0"),
    FoundEntry("/found"),
    BlockEntry("/b", "=begin", "=end"),
    BlockEntry("/c", "=begin", "=end", created=True),
    HookEntry("/h", "-"),
    StubEntry("/st", "s3"),
    SecretsEntry("/sec"),
    KeysEntry("/k"),
    DataEntry("/d"),
    DirEntry("/dir"),
    DirEntry("/scratch", True),
    MountEntry("/m", True),
    AptEntry("apt:git"),
    RepoEntry("/r", True),
    VenvEntry("/v"),
    SnapshotEntry("/snap"),
]


def _read(*lines: str) -> tuple[dict[str, Entry], str | None]:
    record = parse_record(HEAD + "".join(line + "\n" for line in lines))
    return record.entries, record.problem


def test_every_kind_is_covered_and_reads_back_byte_for_byte() -> None:
    assert {type(e) for e in ONE_OF_EACH} == set(ENTRIES.values())
    for entry in ONE_OF_EACH:
        entries, problem = _read(entry.line().rstrip("\n"))
        assert problem is None and entries == {entry.path: entry}
        assert entries[entry.path].line() == entry.line()


def test_a_word_missing_or_too_many_or_malformed_makes_the_record_unreadable() -> None:
    for entry in ONE_OF_EACH:
        kind, path, *words = entry.line().split()
        broken = [f"{kind} {path} {' '.join(words)} extra", f"{kind} !!{path} {' '.join(words)}"]
        optional = isinstance(entry, DirEntry | MountEntry | RepoEntry) or words[-1:] == ["created"]
        if words and not optional:  # a last word that is optional leaves a line of its kind
            broken.append(f"{kind} {path} {' '.join(words[:-1])}".rstrip())
        broken.append(kind)  # no path at all
        for line in broken:
            entries, problem = _read("dir =/fine", line.replace("  ", " "))
            assert problem is not None and entries == {}, line


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(ENTRIES)),
    st.lists(st.sampled_from(["=/a", "-", "s1,s2", "created", "scratch", "made", "", "@@"])),
)
def test_any_words_after_a_kind_read_as_its_entry_or_unreadable(
    kind: str, words: list[str]
) -> None:
    line = " ".join([kind, *words])
    entries, problem = _read(line)
    if problem is None:
        (entry,) = entries.values()
        assert entry.line() == line + "\n"  # what it read is what the line says
    else:
        assert entries == {}


def test_made_state_reads_past_broken_lines_of_every_kind(shell: str, tmp_path: Path) -> None:
    """Each kind's line with a word missing, then with one too many: the record's lines all
    come out, every function after made_lines runs, and nothing reaches stderr."""
    lines = [f"{FORMAT} {VERSION}", "pod =p =id"]
    for entry in ONE_OF_EACH:
        kind, path, *words = entry.line().split()
        lines += [f"{kind} {path}", f"{kind} {path} {' '.join(words)} x y z".replace("  ", " ")]
        lines.append(kind)
    (tmp_path / "record").write_text("".join(line + "\n" for line in lines))
    ran = made(shell, f"made_state disk {tmp_path}/record 100; made_same_end; echo end")
    out = ran.out.splitlines()
    assert out[0] == "made.record disk file" and out[-1] == "end"
    said = [line.removeprefix("made.line disk ") for line in out if line.startswith("made.line")]
    assert len(said) == len(lines)
    assert [s.split(" ")[:2] for s in said] == [line.split(" ")[:2] for line in lines]
    assert ran.err == ""
